package sandbox

import "golang.org/x/sys/unix"

// seccompArch is what the filter needs to know of one architecture: its
// AUDIT_ARCH value (seccomp_data.arch), whether its syscall numbers may
// carry the x32 bit, and the number of each call the rules name.
//
// golang.org/x/sys/unix has the SYS_ constants of the build's
// architecture only, so both tables are written out here, from the
// kernel's syscall tables (arch/x86/entry/syscalls/syscall_64.tbl and
// the generic include/uapi/asm-generic/unistd.h arm64 uses); a test
// checks them against x/sys's per-architecture lists.
type seccompArch struct {
	audit uint32
	// x32: on amd64 a call with x32Bit set in its number is the x32 ABI,
	// under the same AUDIT_ARCH: its own numbers (x32's socket is
	// 0x40000000|41) would slip past every check below.
	x32 bool
	nr  map[string]uint32
}

// x32Bit is __X32_SYSCALL_BIT.
const x32Bit = 0x40000000

// seccompArchs are the architectures the filter is built for; on any
// other the namespaces or Landlock still hold, without it.
var seccompArchs = map[string]seccompArch{
	"amd64": {audit: unix.AUDIT_ARCH_X86_64, x32: true, nr: map[string]uint32{
		"acct":              163,
		"add_key":           248,
		"bpf":               321,
		"clone":             56,
		"clone3":            435,
		"delete_module":     176,
		"finit_module":      313,
		"fsconfig":          431,
		"fsmount":           432,
		"fsopen":            430,
		"fspick":            433,
		"init_module":       175,
		"io_uring_enter":    426,
		"io_uring_register": 427,
		"io_uring_setup":    425,
		"kexec_file_load":   320,
		"kexec_load":        246,
		"keyctl":            250,
		"mount":             165,
		"mount_setattr":     442,
		"move_mount":        429,
		"name_to_handle_at": 303,
		"open_by_handle_at": 304,
		"open_tree":         428,
		"open_tree_attr":    467,
		"perf_event_open":   298,
		"pidfd_getfd":       438,
		"pivot_root":        155,
		"process_vm_readv":  310,
		"process_vm_writev": 311,
		"ptrace":            101,
		"reboot":            169,
		"request_key":       249,
		"sendmmsg":          307,
		"sendmsg":           46,
		"sendto":            44,
		"setns":             308,
		"socket":            41,
		"socketpair":        53,
		"swapoff":           168,
		"swapon":            167,
		"syslog":            103,
		"umount2":           166,
		"unshare":           272,
		"userfaultfd":       323,
	}},
	"arm64": {audit: unix.AUDIT_ARCH_AARCH64, nr: map[string]uint32{
		"acct":              89,
		"add_key":           217,
		"bpf":               280,
		"clone":             220,
		"clone3":            435,
		"delete_module":     106,
		"finit_module":      273,
		"fsconfig":          431,
		"fsmount":           432,
		"fsopen":            430,
		"fspick":            433,
		"init_module":       105,
		"io_uring_enter":    426,
		"io_uring_register": 427,
		"io_uring_setup":    425,
		"kexec_file_load":   294,
		"kexec_load":        104,
		"keyctl":            219,
		"mount":             40,
		"mount_setattr":     442,
		"move_mount":        429,
		"name_to_handle_at": 264,
		"open_by_handle_at": 265,
		"open_tree":         428,
		"open_tree_attr":    467,
		"perf_event_open":   241,
		"pidfd_getfd":       438,
		"pivot_root":        41,
		"process_vm_readv":  270,
		"process_vm_writev": 271,
		"ptrace":            117,
		"reboot":            142,
		"request_key":       218,
		"sendmmsg":          269,
		"sendmsg":           211,
		"sendto":            206,
		"setns":             268,
		"socket":            198,
		"socketpair":        199,
		"swapoff":           225,
		"swapon":            224,
		"syslog":            116,
		"umount2":           39,
		"unshare":           97,
		"userfaultfd":       282,
	}},
}
