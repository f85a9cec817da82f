package sandbox

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// The compiler from the rule table to a classic BPF program. Jumps are
// written to labels and resolved at the end, where a jump that would
// need more than a conditional jump's 8 bits of offset is an error, not
// a silently wrong program.

// struct seccomp_data: nr at 0, arch at 4, instruction pointer at 8,
// args at 16 + 8·i. BPF_W loads read native-endian words; both
// architectures with a table are little-endian, so an argument's low 32
// bits are at its offset.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func argLow(i int) uint32 { return offArgs + 8*uint32(i) }

const (
	ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	andK = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	jeqK = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jgeK = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jgtK = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
	jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	retK = unix.BPF_RET | unix.BPF_K
)

// bpfMaxInsns is the kernel's BPF_MAXINSNS.
const bpfMaxInsns = 4096

// Errors of the compiler: a table it cannot turn into a program.
var (
	errJumpTooFar   = errors.New("a conditional jump is more than 255 instructions long")
	errUnknownCall  = errors.New("a rule names a system call the architecture's table lacks")
	errDuplicate    = errors.New("two rules name the same system call")
	errTooLong      = errors.New("the program is longer than the kernel takes")
	errUnboundLabel = errors.New("a jump goes to a label never placed")
	errBadCond      = errors.New("a condition tests no value or an argument past the sixth")
)

// label is a place in the program; fall is the next instruction.
type label int

const fall label = -1

type fixup struct {
	at   int
	t, f label
}

// asm collects instructions whose jumps go to labels.
type asm struct {
	ins    []unix.SockFilter
	fix    []fixup
	placed []int // by label: the instruction it stands before, -1 until placed
}

func (a *asm) label() label {
	a.placed = append(a.placed, -1)
	return label(len(a.placed) - 1)
}

func (a *asm) place(l label) { a.placed[l] = len(a.ins) }

func (a *asm) stmt(code uint16, k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

func (a *asm) ret(v uint32) { a.stmt(retK, v) }

func (a *asm) jump(code uint16, k uint32, t, f label) {
	a.fix = append(a.fix, fixup{at: len(a.ins), t: t, f: f})
	a.stmt(code, k)
}

// assemble resolves every jump: only forward, at most 255 instructions.
func (a *asm) assemble() ([]unix.SockFilter, error) {
	if len(a.ins) > bpfMaxInsns {
		return nil, fmt.Errorf("%w: %d instructions", errTooLong, len(a.ins))
	}
	off := func(at int, l label) (uint8, error) {
		if l == fall {
			return 0, nil
		}
		to := a.placed[l]
		if to < 0 {
			return 0, errUnboundLabel
		}
		d := to - at - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("%w: instruction %d to %d", errJumpTooFar, at, to)
		}
		return uint8(d), nil
	}
	out := slices.Clone(a.ins)
	for _, f := range a.fix {
		var err1, err2 error
		out[f.at].Jt, err1 = off(f.at, f.t)
		out[f.at].Jf, err2 = off(f.at, f.f)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// filterRet are the return values of the verdicts, and of a call of
// another ABI.
type filterRet struct {
	allow, refuse, absent, foreign uint32
}

// defaultRets answers a refusal with EPERM and kills a process that
// makes a call of another ABI.
var defaultRets = filterRet{
	allow:   unix.SECCOMP_RET_ALLOW,
	refuse:  unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM),
	absent:  unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS),
	foreign: unix.SECCOMP_RET_KILL_PROCESS,
}

func (r filterRet) of(v verdict) uint32 {
	switch v {
	case allow:
		return r.allow
	case absent:
		return r.absent
	}
	return r.refuse // a verdict this switch does not know refuses
}

// numbered is a rule with its number on one architecture.
type numbered struct {
	nr   uint32
	rule sysRule
}

func number(arch seccompArch, rules []sysRule) ([]numbered, error) {
	out := make([]numbered, 0, len(rules))
	seen := map[uint32]string{}
	for _, r := range rules {
		nr, ok := arch.nr[r.name]
		if !ok {
			return nil, fmt.Errorf("%w: %s", errUnknownCall, r.name)
		}
		if prev, dup := seen[nr]; dup {
			return nil, fmt.Errorf("%w: %s and %s", errDuplicate, prev, r.name)
		}
		seen[nr] = r.name
		for _, c := range r.clauses {
			for _, k := range c.when {
				if len(k.in) == 0 || k.arg < 0 || k.arg > 5 {
					return nil, fmt.Errorf("%w: %s", errBadCond, r.name)
				}
			}
		}
		out = append(out, numbered{nr, r})
	}
	slices.SortFunc(out, func(a, b numbered) int { return int(a.nr) - int(b.nr) })
	return out, nil
}

// leafRules is how many rules a leaf of the search tree tests one after
// another.
const leafRules = 4

// compileFilter builds the program for one architecture:
//
//  1. a call of another ABI (another AUDIT_ARCH: i386 on amd64, arm32
//     on arm64; or x32's numbers on amd64) is answered with r.foreign;
//  2. a call outside the lowest and highest number the rules name is
//     allowed at once — most of a plugin's hot path is a handful of
//     instructions;
//  3. the rest go down a binary search on the number to their rule,
//     whose clauses decide; a number without a rule is allowed.
func compileFilter(arch seccompArch, rules []sysRule, r filterRet) ([]unix.SockFilter, error) {
	rs, err := number(arch, rules)
	if err != nil {
		return nil, err
	}
	a := &asm{}
	sameABI := a.label()
	a.stmt(ldW, offArch)
	a.jump(jeqK, arch.audit, sameABI, fall)
	a.ret(r.foreign)
	a.place(sameABI)
	a.stmt(ldW, offNr)
	if arch.x32 {
		notX32 := a.label()
		a.jump(jset, x32Bit, fall, notX32)
		a.ret(r.foreign)
		a.place(notX32)
	}
	if len(rs) > 0 {
		aboveLow, belowHigh := a.label(), a.label()
		a.jump(jgeK, rs[0].nr, aboveLow, fall)
		a.ret(r.allow)
		a.place(aboveLow)
		a.jump(jgtK, rs[len(rs)-1].nr, fall, belowHigh)
		a.ret(r.allow)
		a.place(belowHigh)
	}
	tree(a, rs, r)
	return a.assemble()
}

// tree dispatches on the number in A to rs (sorted); every path ends in
// a return.
func tree(a *asm, rs []numbered, r filterRet) {
	if len(rs) <= leafRules {
		for _, n := range rs {
			other := a.label()
			a.jump(jeqK, n.nr, fall, other)
			body(a, n.rule, r)
			a.place(other)
		}
		a.ret(r.allow)
		return
	}
	mid := len(rs) / 2
	upper := a.label()
	a.jump(jgeK, rs[mid].nr, upper, fall)
	tree(a, rs[:mid], r)
	a.place(upper)
	tree(a, rs[mid:], r)
}

// body decides one call: each clause loads the arguments it tests, and
// returns its verdict when all hold; the default follows the last.
func body(a *asm, rule sysRule, r filterRet) {
	for _, c := range rule.clauses {
		next := a.label()
		for _, k := range c.when {
			test(a, k, next)
		}
		a.ret(r.of(c.then))
		a.place(next)
	}
	a.ret(r.of(rule.dflt))
}

// test falls through when k holds and jumps to fail when it does not.
func test(a *asm, k cond, fail label) {
	a.stmt(ldW, argLow(k.arg))
	if k.mask != 0 {
		a.stmt(andK, k.mask)
	}
	ok := a.label()
	for i, v := range k.in {
		last := i == len(k.in)-1
		switch {
		case k.not:
			// Any match fails; past the last value it holds.
			a.jump(jeqK, v, fail, fall)
		case last:
			a.jump(jeqK, v, fall, fail)
		default:
			a.jump(jeqK, v, ok, fall)
		}
	}
	a.place(ok)
}
