# The namespace.
terraform import gpuslice_quota.team_a team-a
