package providerschema_test

import (
	"strings"
	"testing"

	providerschema "github.com/gpuslice/gpuslice/schemas/provider"
)

// schemaJSON is a provider schema with one resource whose block is body.
func schemaJSON(body string) []byte {
	return []byte(`{"format_version":"1.0","provider_schemas":{"registry.terraform.io/gpuslice/gpuslice":{
  "provider":{"version":0,"block":{}},
  "resource_schemas":{"gpuslice_package":{"version":0,"block":` + body + `}}}}}`)
}

func TestBreaking(t *testing.T) {
	base := `{"attributes":{"name":{"type":"string","required":true},"fraction":{"type":"number","required":true},"memo":{"type":"string","optional":true}},
	  "block_types":{"expose":{"nesting_mode":"single","block":{"attributes":{"port":{"type":"number","optional":true}}}}}}`
	for _, tc := range []struct {
		name, changed string
		want          string // "" means compatible
	}{
		{"same", base, ""},
		{"optional attribute added", strings.Replace(base, `"memo"`, `"note":{"type":"string","optional":true},"memo"`, 1), ""},
		{"required made optional", strings.Replace(base, `"fraction":{"type":"number","required":true}`, `"fraction":{"type":"number","optional":true}`, 1), ""},
		{"attribute removed", strings.Replace(base, `,"memo":{"type":"string","optional":true}`, ``, 1), "gpuslice_package.memo: attribute removed"},
		{"type changed", strings.Replace(base, `"fraction":{"type":"number"`, `"fraction":{"type":"string"`, 1), "gpuslice_package.fraction: type changed from number to string"},
		{"newly required", strings.Replace(base, `"memo":{"type":"string","optional":true}`, `"memo":{"type":"string","required":true}`, 1), "gpuslice_package.memo: now required"},
		{"new required attribute", strings.Replace(base, `"memo"`, `"note":{"type":"string","required":true},"memo"`, 1), "gpuslice_package.note: new required attribute"},
		{"made computed only", strings.Replace(base, `"memo":{"type":"string","optional":true}`, `"memo":{"type":"string","computed":true}`, 1), "gpuslice_package.memo: no longer settable"},
		{"nested attribute removed", strings.Replace(base, `"port":{"type":"number","optional":true}`, ``, 1), "gpuslice_package.expose.port: attribute removed"},
		{"block nesting changed", strings.Replace(base, `"nesting_mode":"single"`, `"nesting_mode":"list"`, 1), "gpuslice_package.expose: nesting changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := providerschema.Breaking(schemaJSON(base), schemaJSON(tc.changed))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("compatible change reported breaking: %v", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("got %v, want one change starting %q", got, tc.want)
			}
		})
	}
	got, _ := providerschema.Breaking(schemaJSON(base), []byte(`{"format_version":"1.0","provider_schemas":{"registry.terraform.io/gpuslice/gpuslice":{"provider":{"version":0,"block":{}}}}}`))
	if len(got) != 1 || got[0] != "resource gpuslice_package removed" {
		t.Errorf("removed resource: got %v", got)
	}
}
