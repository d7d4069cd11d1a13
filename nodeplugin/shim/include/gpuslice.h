/*
 * gpuslice.h: the contract between libgpuslice.so (the in-container
 * enforcement library), the node plugin that configures it, and anything that
 * reads a claim's accounting files (the plugin's metrics and enforcer, tests).
 *
 * One claim = two files in the claim's accounting directory:
 *
 *   GPUSLICE_LIMITS_FILE  the claim's limits, written by the node plugin when
 *                         it prepares the claim and mounted read-only into the
 *                         claim's containers (a bind mount of the file itself,
 *                         on top of the read-write directory: a mount point
 *                         cannot be written, unlinked, renamed or replaced from
 *                         the container, whatever its capabilities short of
 *                         CAP_SYS_ADMIN). The plugin rewrites it in place only,
 *                         never by rename: the mount pins the inode. Its
 *                         observed_* fields are the plugin's enforcer's
 *                         measurement of the claim's real device memory.
 *   GPUSLICE_REGION_FILE  the claim's usage (the accounting region): shared by
 *                         every process of every container that uses the
 *                         claim, and writable by all of them, since each one
 *                         charges it. Nothing in it is a limit: a process that
 *                         corrupts it hurts only its own claim, and every
 *                         reader treats its fields as untrusted.
 *
 * The library charges each device allocation against the region before the
 * allocation happens, so the claim as a whole stays within memory_limit of
 * the limits file. It charges against the larger of the region's `used` and
 * the limits file's observed_used plus what the charging process itself
 * charged and freed since that observation's sample began. A process that
 * zeroes `used` can thus take more only until the plugin's next observation
 * counts what the claim really holds; the plugin's enforcer stops any
 * process of a claim over its limit (it also catches what never calls the
 * library: static binaries, direct driver calls).
 *
 * WHERE THE LIBRARY LOOKS
 *   If GPUSLICE_CONTAINER_LIMITS exists, it is the claim's container: the
 *   limits and the region are read in GPUSLICE_CONTAINER_ACCOUNTING_DIR and
 *   GPUSLICE_ACCOUNTING_DIR is ignored (a tenant would point it at a
 *   directory of its own). Only where it does not exist (the library's own
 *   tests, outside any container) is GPUSLICE_ACCOUNTING_DIR used. In a
 *   claim's container the path exists unless a process changes its own view
 *   of the file system: renaming a directory above the mount, or chroot.
 *   Such a process can make the library read anything, as it can load no
 *   library at all (a static binary): the plugin's enforcer holds it, not
 *   the library. Without a limits file the library refuses device
 *   allocations (fail closed).
 *
 *   The environment (GPUSLICE_MEMORY_LIMIT, ...) may only make a limit
 *   stricter for the process that has it; it never creates or raises one.
 *
 * The files are memory-mapped (MAP_SHARED). Every counter is a naturally
 * aligned 64-bit integer in the platform's byte order (little-endian on every
 * platform the NVIDIA driver supports) and is only read or written with atomic
 * instructions; readers in other languages must do the same (the Go reader
 * copies the region with atomic 8-byte loads).
 *
 * COMPATIBILITY OF THE REGION
 *   version is the layout's major version. A reader or writer that finds:
 *   - the same version: uses it. Fields are only ever added at the end of the
 *     header or of a slot (header_size, slot_size grow, within the bounds
 *     GPUSLICE_MAX_*); code takes the sizes from the file once, when it
 *     attaches, checks them against the file's length and never reads them
 *     again, so a newer and an older library share one region without
 *     corrupting each other, and a process that rewrites them later cannot
 *     make another process read or write outside the file.
 *   - another version while a process is attached (GPUSLICE_LOCK_PRESENCE is
 *     held): does not touch the file and refuses device allocations with a
 *     message naming both versions (fail closed).
 *   - another version, or a damaged file, while no process is attached:
 *     reinitialises it (nothing can be allocated while nobody is attached, so
 *     no memory is lost), from the limits file. GPUSLICE_LOCK_* below is the
 *     one part of the protocol every version must keep.
 *   The header's memory_limit, compute_share, flags and compute_window_ms are
 *   a copy of the limits, written when the region is created for libraries
 *   older than the limits file (which read them there); this library and the
 *   node plugin ignore them.
 *
 * COMPATIBILITY OF THE LIMITS FILE
 *   version 1; size is the file's structure size, which only grows (fields
 *   are added at the end). A reader needs the same version and a size of at
 *   least GPUSLICE_LIMITS_SIZE; the library refuses device allocations
 *   otherwise.
 *
 * LOCKS (Linux open-file-description locks, fcntl F_OFD_SETLK, 1 byte each,
 * at offsets beyond the end of the region file; they vanish when the process
 * dies, even after kill -9 and in any PID namespace, because the kernel drops
 * them with the last descriptor):
 *   GPUSLICE_LOCK_INIT      exclusive, held briefly while attaching, so one
 *                           process at a time creates, checks or migrates;
 *   GPUSLICE_LOCK_PRESENCE  shared, held by every attached process for its
 *                           lifetime; whoever can take it exclusively knows no
 *                           process is attached;
 *   GPUSLICE_LOCK_SLOT0 + i exclusive, held by the owner of slot i for its
 *                           lifetime. A slot whose state is LIVE but whose
 *                           lock can be taken belongs to a dead process: the
 *                           taker subtracts the slot's `used` from the
 *                           header's `used` and frees the slot (exactly once,
 *                           because only the lock holder may do it).
 *
 * INVARIANTS (among processes that follow the protocol)
 *   header.used <= limits.memory_limit after every charge (a charge is a
 *   compare-and-swap that fails rather than overshoot);
 *   header.used >= the sum of the live slots' used (a slot is charged after
 *   the header and credited before it, so a crash between the two steps can
 *   only leave the header too high, never too low; such a leftover is
 *   cleared the next time a process attaches to an idle region).
 */
#ifndef GPUSLICE_H
#define GPUSLICE_H

#include <stdint.h>

/* ---- Environment, set by the node plugin (the CDI spec of the claim) ---- */

/* The variables below that name a limit may only make it stricter than the
 * limits file (GPUSLICE_LIMITS_FILE) for the process that has them: a lower
 * memory budget or share, burst off, a shorter window, a larger context
 * charge. The node plugin sets them to the file's values, for programs that
 * read them. */

/* Device-memory budget in bytes (decimal; the suffixes Ki, Mi, Gi are
 * accepted). A claim of several whole GPUs gets their memory together; a
 * budget larger than a device leaves that device's memory figures as the
 * driver reports them. */
#define GPUSLICE_ENV_MEMORY_LIMIT "GPUSLICE_MEMORY_LIMIT"
/* Share of the GPU's compute time in percent, 1..100; 100 turns launch
 * pacing off. */
#define GPUSLICE_ENV_COMPUTE_SHARE "GPUSLICE_COMPUTE_SHARE"
/* Directory holding GPUSLICE_LIMITS_FILE and GPUSLICE_REGION_FILE, shared
 * by all containers of the claim; ignored where GPUSLICE_CONTAINER_LIMITS
 * exists (see WHERE THE LIBRARY LOOKS). Default:
 * GPUSLICE_CONTAINER_ACCOUNTING_DIR. */
#define GPUSLICE_ENV_ACCOUNTING_DIR "GPUSLICE_ACCOUNTING_DIR"
/* "0" turns burst off where the limits file allows it (GPUSLICE_FLAG_COMPUTE_BURST:
 * the claim may use GPU time that other processes leave idle); "1" cannot
 * turn it on. */
#define GPUSLICE_ENV_COMPUTE_BURST "GPUSLICE_COMPUTE_BURST"
/* Pacing window in milliseconds, shorter than the limits file's only: an
 * idle claim may run at most share% of one window back to back before
 * pacing starts. */
#define GPUSLICE_ENV_COMPUTE_WINDOW_MS "GPUSLICE_COMPUTE_WINDOW_MS"
/* Bytes charged for each CUDA context (the driver's own per-context
 * memory), more than the limits file's only. */
#define GPUSLICE_ENV_CONTEXT_OVERHEAD "GPUSLICE_CONTEXT_OVERHEAD"
/* "1": log each refusal and configuration decision on stderr. */
#define GPUSLICE_ENV_DEBUG "GPUSLICE_DEBUG"

/* What the node plugin writes into a claim's limits file. */
#define GPUSLICE_DEFAULT_CONTEXT_OVERHEAD 314572800ULL
#define GPUSLICE_DEFAULT_COMPUTE_WINDOW_MS 100u

/* ---- Fixed paths inside the container ---- */

/* Where the node plugin mounts the library. Install a new version under a new
 * host file name (or write-then-rename): replacing the file in place would
 * corrupt processes that have it mapped. */
#define GPUSLICE_CONTAINER_LIBRARY "/usr/local/lib/gpuslice/libgpuslice.so"
/* Holds the line GPUSLICE_CONTAINER_LIBRARY, so every process loads it. */
#define GPUSLICE_CONTAINER_PRELOAD "/etc/ld.so.preload"
/* The claim's accounting directory (mounted read-write) and, on top of it,
 * its limits file (mounted read-only). */
#define GPUSLICE_CONTAINER_ACCOUNTING_DIR "/run/gpuslice"
#define GPUSLICE_LIMITS_FILE "gpuslice.limits"
#define GPUSLICE_REGION_FILE "gpuslice.region"
#define GPUSLICE_CONTAINER_LIMITS GPUSLICE_CONTAINER_ACCOUNTING_DIR "/" GPUSLICE_LIMITS_FILE

/* ---- The limits file (read-only in the container) ---- */

#define GPUSLICE_LIMITS_MAGIC 0x5354494d494c5347ULL /* "GSLIMITS" little-endian */
#define GPUSLICE_LIMITS_VERSION 1u
#define GPUSLICE_LIMITS_SIZE 128u

struct gpuslice_limits {
	/* written by the node plugin when it prepares the claim */
	uint64_t magic;             /*   0 GPUSLICE_LIMITS_MAGIC, written last */
	uint32_t version;           /*   8 GPUSLICE_LIMITS_VERSION */
	uint32_t size;              /*  12 bytes of this structure in the file */
	uint64_t memory_limit;      /*  16 bytes; the claim's budget, > 0 */
	uint32_t compute_share;     /*  24 percent, 1..100 */
	uint32_t flags;             /*  28 GPUSLICE_FLAG_* */
	uint32_t compute_window_ms; /*  32 1..60000 */
	uint32_t sample_period_ms;  /*  36 how often observed_* is updated */
	uint64_t context_overhead;  /*  40 bytes charged per CUDA context */
	uint64_t created_unix_ns;   /*  48 */
	uint64_t reserved0;         /*  56 */
	/* updated in place by the plugin's enforcer (atomic stores) */
	uint64_t observed_used;     /*  64 device memory NVML shows for the claim's processes */
	uint64_t observed_seq;      /*  72 a sequence lock: odd while the two fields around it
	                             *     are written, +2 per observation, 0 before the first */
	uint64_t observed_unix_ns;  /*  80 CLOCK_REALTIME when the sample began */
	uint64_t reserved1[5];      /*  88 */
};

#define GPUSLICE_LIMITS_OFF_MAGIC 0
#define GPUSLICE_LIMITS_OFF_VERSION 8
#define GPUSLICE_LIMITS_OFF_SIZE 12
#define GPUSLICE_LIMITS_OFF_MEMORY_LIMIT 16
#define GPUSLICE_LIMITS_OFF_COMPUTE_SHARE 24
#define GPUSLICE_LIMITS_OFF_FLAGS 28
#define GPUSLICE_LIMITS_OFF_COMPUTE_WINDOW_MS 32
#define GPUSLICE_LIMITS_OFF_SAMPLE_PERIOD_MS 36
#define GPUSLICE_LIMITS_OFF_CONTEXT_OVERHEAD 40
#define GPUSLICE_LIMITS_OFF_CREATED_UNIX_NS 48
#define GPUSLICE_LIMITS_OFF_OBSERVED_USED 64
#define GPUSLICE_LIMITS_OFF_OBSERVED_SEQ 72
#define GPUSLICE_LIMITS_OFF_OBSERVED_UNIX_NS 80

/* ---- The region ---- */

#define GPUSLICE_REGION_MAGIC 0x4543494c53555047ULL /* "GPUSLICE" little-endian */
#define GPUSLICE_REGION_VERSION 1u
#define GPUSLICE_HEADER_SIZE 256u
#define GPUSLICE_SLOT_SIZE 128u
#define GPUSLICE_SLOT_COUNT 512u
#define GPUSLICE_REGION_SIZE (GPUSLICE_HEADER_SIZE + GPUSLICE_SLOT_SIZE * GPUSLICE_SLOT_COUNT)
/* Bounds on the geometry a region may declare (a newer minor layout grows
 * within them): readers refuse anything larger, so a region's own fields
 * never make a reader map or copy more than GPUSLICE_MAX_REGION_SIZE. */
#define GPUSLICE_MAX_HEADER_SIZE 4096u
#define GPUSLICE_MAX_SLOT_SIZE 1024u
#define GPUSLICE_MAX_SLOT_COUNT 4096u
#define GPUSLICE_MAX_REGION_SIZE (GPUSLICE_MAX_HEADER_SIZE + GPUSLICE_MAX_SLOT_SIZE * GPUSLICE_MAX_SLOT_COUNT)

#define GPUSLICE_FLAG_COMPUTE_BURST 0x1u

#define GPUSLICE_SLOT_FREE 0u
#define GPUSLICE_SLOT_LIVE 1u

#define GPUSLICE_LOCK_INIT (1ULL << 30)
#define GPUSLICE_LOCK_PRESENCE (GPUSLICE_LOCK_INIT + 1)
#define GPUSLICE_LOCK_SLOT0 (GPUSLICE_LOCK_INIT + 64)

struct gpuslice_region_header {
	/* written once, when the region is created */
	uint64_t magic;             /*   0 GPUSLICE_REGION_MAGIC */
	uint32_t version;           /*   8 GPUSLICE_REGION_VERSION */
	uint32_t header_size;       /*  12 offset of slot 0 */
	uint32_t slot_size;         /*  16 distance between slots */
	uint32_t slot_count;        /*  20 */
	uint64_t memory_limit;      /*  24 copy of the limits; ignored (see COMPATIBILITY) */
	uint32_t compute_share;     /*  32 copy of the limits; ignored */
	uint32_t flags;             /*  36 copy of the limits; ignored */
	uint64_t created_unix_ns;   /*  40 */
	uint32_t compute_window_ms; /*  48 copy of the limits; ignored */
	uint32_t reserved0;         /*  52 */
	uint64_t reserved1;         /*  56 */
	/* memory accounting (atomic) */
	uint64_t used;              /*  64 bytes charged by all processes */
	uint64_t high_water;        /*  72 highest value of used */
	uint64_t oom_count;         /*  80 allocations refused for the budget */
	uint64_t reclaimed_bytes;   /*  88 credited from dead processes */
	uint64_t reclaimed_procs;   /*  96 dead processes whose slot was freed */
	uint64_t attach_count;      /* 104 processes attached since creation */
	uint64_t reserved2[2];      /* 112 */
	/* compute pacing (atomic) */
	int64_t pace_tokens_ns;     /* 128 GPU time the claim may still use */
	uint64_t pace_last_ns;      /* 136 CLOCK_MONOTONIC of the last refill */
	uint64_t gpu_busy_ns;       /* 144 measured GPU time of paced launches */
	uint64_t throttled_ns;      /* 152 time launches were held back */
	uint64_t launches;          /* 160 paced launches */
	uint64_t reserved3[3];      /* 168 */
	uint64_t reserved4[8];      /* 192 */
};

struct gpuslice_slot {
	uint32_t state;          /*   0 GPUSLICE_SLOT_FREE or _LIVE */
	uint32_t pid;            /*   4 in the owner's PID namespace; display only */
	uint64_t attach_unix_ns; /*   8 */
	uint64_t used;           /*  16 bytes charged by this process */
	uint64_t context_bytes;  /*  24 the part of used that is context overhead */
	uint64_t allocations;    /*  32 live allocations */
	uint64_t gpu_busy_ns;    /*  40 measured GPU time of its paced launches */
	uint64_t launches;       /*  48 paced launches */
	uint64_t oom_count;      /*  56 its refused allocations */
	char comm[16];           /*  64 process name, NUL-padded */
	uint64_t reserved[6];    /*  80 */
};

/* Byte offsets, for readers that do not use the structs. */
#define GPUSLICE_OFF_MAGIC 0
#define GPUSLICE_OFF_VERSION 8
#define GPUSLICE_OFF_HEADER_SIZE 12
#define GPUSLICE_OFF_SLOT_SIZE 16
#define GPUSLICE_OFF_SLOT_COUNT 20
#define GPUSLICE_OFF_MEMORY_LIMIT 24
#define GPUSLICE_OFF_COMPUTE_SHARE 32
#define GPUSLICE_OFF_FLAGS 36
#define GPUSLICE_OFF_CREATED_UNIX_NS 40
#define GPUSLICE_OFF_COMPUTE_WINDOW_MS 48
#define GPUSLICE_OFF_USED 64
#define GPUSLICE_OFF_HIGH_WATER 72
#define GPUSLICE_OFF_OOM_COUNT 80
#define GPUSLICE_OFF_RECLAIMED_BYTES 88
#define GPUSLICE_OFF_RECLAIMED_PROCS 96
#define GPUSLICE_OFF_ATTACH_COUNT 104
#define GPUSLICE_OFF_PACE_TOKENS_NS 128
#define GPUSLICE_OFF_PACE_LAST_NS 136
#define GPUSLICE_OFF_GPU_BUSY_NS 144
#define GPUSLICE_OFF_THROTTLED_NS 152
#define GPUSLICE_OFF_LAUNCHES 160
#define GPUSLICE_SLOT_OFF_STATE 0
#define GPUSLICE_SLOT_OFF_PID 4
#define GPUSLICE_SLOT_OFF_ATTACH_UNIX_NS 8
#define GPUSLICE_SLOT_OFF_USED 16
#define GPUSLICE_SLOT_OFF_CONTEXT_BYTES 24
#define GPUSLICE_SLOT_OFF_ALLOCATIONS 32
#define GPUSLICE_SLOT_OFF_GPU_BUSY_NS 40
#define GPUSLICE_SLOT_OFF_LAUNCHES 48
#define GPUSLICE_SLOT_OFF_OOM_COUNT 56
#define GPUSLICE_SLOT_OFF_COMM 64

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#include <stddef.h>
_Static_assert(sizeof(struct gpuslice_region_header) == GPUSLICE_HEADER_SIZE, "header size");
_Static_assert(sizeof(struct gpuslice_slot) == GPUSLICE_SLOT_SIZE, "slot size");
_Static_assert(offsetof(struct gpuslice_region_header, used) == GPUSLICE_OFF_USED, "used");
_Static_assert(offsetof(struct gpuslice_region_header, compute_window_ms) == GPUSLICE_OFF_COMPUTE_WINDOW_MS, "window");
_Static_assert(offsetof(struct gpuslice_region_header, attach_count) == GPUSLICE_OFF_ATTACH_COUNT, "attach");
_Static_assert(offsetof(struct gpuslice_region_header, pace_tokens_ns) == GPUSLICE_OFF_PACE_TOKENS_NS, "tokens");
_Static_assert(offsetof(struct gpuslice_region_header, launches) == GPUSLICE_OFF_LAUNCHES, "launches");
_Static_assert(offsetof(struct gpuslice_slot, used) == GPUSLICE_SLOT_OFF_USED, "slot used");
_Static_assert(offsetof(struct gpuslice_slot, oom_count) == GPUSLICE_SLOT_OFF_OOM_COUNT, "slot oom");
_Static_assert(offsetof(struct gpuslice_slot, comm) == GPUSLICE_SLOT_OFF_COMM, "slot comm");
_Static_assert(sizeof(struct gpuslice_limits) == GPUSLICE_LIMITS_SIZE, "limits size");
_Static_assert(offsetof(struct gpuslice_limits, memory_limit) == GPUSLICE_LIMITS_OFF_MEMORY_LIMIT, "limits memory");
_Static_assert(offsetof(struct gpuslice_limits, compute_share) == GPUSLICE_LIMITS_OFF_COMPUTE_SHARE, "limits share");
_Static_assert(offsetof(struct gpuslice_limits, flags) == GPUSLICE_LIMITS_OFF_FLAGS, "limits flags");
_Static_assert(offsetof(struct gpuslice_limits, compute_window_ms) == GPUSLICE_LIMITS_OFF_COMPUTE_WINDOW_MS, "limits window");
_Static_assert(offsetof(struct gpuslice_limits, sample_period_ms) == GPUSLICE_LIMITS_OFF_SAMPLE_PERIOD_MS, "limits period");
_Static_assert(offsetof(struct gpuslice_limits, context_overhead) == GPUSLICE_LIMITS_OFF_CONTEXT_OVERHEAD, "limits ctx");
_Static_assert(offsetof(struct gpuslice_limits, created_unix_ns) == GPUSLICE_LIMITS_OFF_CREATED_UNIX_NS, "limits created");
_Static_assert(offsetof(struct gpuslice_limits, observed_used) == GPUSLICE_LIMITS_OFF_OBSERVED_USED, "limits observed");
_Static_assert(offsetof(struct gpuslice_limits, observed_seq) == GPUSLICE_LIMITS_OFF_OBSERVED_SEQ, "limits seq");
_Static_assert(offsetof(struct gpuslice_limits, observed_unix_ns) == GPUSLICE_LIMITS_OFF_OBSERVED_UNIX_NS, "limits observed at");
#endif

#endif /* GPUSLICE_H */
