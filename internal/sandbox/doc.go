//go:build linux

// Package sandbox confines one plugin process so that the operating system,
// not the plugin's good manners, enforces what Airlock promises: the plugin
// sees only the files it needs, reaches the network only through the
// egress proxy, cannot see or signal the host, and every process it starts
// dies with it.
//
// The host never runs a plugin directly. Start re-executes the running
// binary (os.Executable) as a small init, which confines itself and then
// starts the plugin as its child, reaps every descendant and, when the
// plugin exits, kills whatever the plugin left behind before exiting with
// the plugin's status. A binary that launches plugins must call Init first
// thing in main (and in TestMain of tests that launch plugins).
//
// # Levels
//
//   - LevelNamespaces: new user, mount, pid, network, IPC and UTS
//     namespaces (the bubblewrap model). The root is a fresh tmpfs holding
//     read-only binds of the system directories, the plugin's install
//     directory and any extra read-only paths, its private directory
//     read-write, a private /tmp, a minimal /dev and its own /proc. The
//     network namespace holds only loopback, where the host has bound the
//     listeners it relays to the egress proxy (and the Executa files
//     endpoint). The plugin runs without capabilities, with no_new_privs
//     and a seccomp filter.
//   - LevelLandlock: where user namespaces are unavailable (many
//     containers). Landlock rules allow reads of the same directories and
//     writes to the private directory only, TCP connects only to the
//     egress proxy's and files endpoint's ports, no TCP bind, and scope
//     signals and abstract unix sockets to the sandbox; a seccomp filter
//     refuses UDP, raw and packet sockets. The plugin shares the host's
//     uid and process ids; Landlock stops it signalling other processes
//     or reading anything of theirs, and grants it only the machine-wide
//     entries of /proc runtimes read and its own process's directory,
//     without net (the machine's sockets).
//   - LevelOff: no confinement; chosen only explicitly, and warned about
//     at every launch.
//
// LevelAuto takes the strongest level the kernel allows (Detect).
//
// # Security
//
// At both levels a seccomp filter refuses what no plugin needs and what
// would reach around the other layers (ptrace, new namespaces and mounts,
// keyrings, BPF, io_uring, sockets other than unix and TCP, TCP Fast
// Open), and kills a process that calls through another ABI (i386, x32,
// arm32). The filter is compiled from a table of system calls, argument
// checks and verdicts (seccomp_rules_linux.go) for each architecture
// with a table of syscall numbers (amd64, arm64); on any other the
// namespaces or Landlock still hold, without it. Where the kernel allows,
// the init answers the filter's refusals itself (a seccomp listener), so
// that the host logs each kind as it first happens and Exit.Refused
// counts them.
//
// Limits (memory, processes, open files, CPU priority, disk) are applied by
// the init with setrlimit and watched: a plugin that reaches its memory,
// process or disk limit is killed whole, and Exit says which limit. The
// disk limit bounds the plugin's writable places together (its private
// directory, and its /tmp and /dev/shm at the namespaces level), not only
// each file. The init trusts nothing the plugin does after it starts: it
// never reads from the plugin and exits as soon as the plugin does.
//
// A root host runs each plugin under a uid and gid of its own, with no
// supplementary group (Config.PluginUID, Spec.UID): uids of
// Config.UIDRange, claimed with flock in a directory every host of the
// machine shares, so that a plugin keeps its uid across its host's
// restarts and two hosts never share one. An unprivileged host cannot:
// its plugins run as its uid, with its supplementary groups (a user
// namespace it creates must deny setgroups), and at the landlock level
// the kernel separates them only where Landlock does.
//
// # Size
//
// The package is over 1,500 lines because each confinement level is a
// kernel interface of its own (namespaces and mounts, Landlock, seccomp,
// limits) and the init that applies them runs in the re-executed binary
// before the plugin. They share one Spec and one detection of what the
// machine allows, and each has its own file.
package sandbox
