//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Two interpreters of the compiled filter, independent of the compiler:
// x/net/bpf's VM, and a small one written here to the kernel's seccomp
// semantics. Every verdict a test asserts is the verdict both agree on.

// call is one system call as the filter sees it.
type call struct {
	arch uint32
	nr   uint32
	args [6]uint64
}

// seccompData lays c out as the kernel's struct seccomp_data, in the
// native (little-endian) byte order: nr, arch, instruction pointer, args.
func seccompData(c call) []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], c.nr)
	binary.LittleEndian.PutUint32(b[4:], c.arch)
	for i, a := range c.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runKernel interprets prog the way the kernel's seccomp BPF does for the
// instructions a filter may hold: 32-bit native-endian loads from
// seccomp_data (aligned, inside it), ALU, jumps, returns.
func runKernel(prog []unix.SockFilter, data []byte) (uint32, error) {
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K%4 != 0 || int(in.K)+4 > len(data) {
				return 0, fmt.Errorf("instruction %d loads at %d, outside seccomp_data", pc, in.K)
			}
			a = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= in.K
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var ok bool
			switch in.Code & 0xf0 {
			case unix.BPF_JEQ:
				ok = a == in.K
			case unix.BPF_JGT:
				ok = a > in.K
			case unix.BPF_JGE:
				ok = a >= in.K
			case unix.BPF_JSET:
				ok = a&in.K != 0
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K, nil
		default:
			return 0, fmt.Errorf("instruction %d: opcode %#x is not one this interpreter (or this filter) uses", pc, in.Code)
		}
	}
	return 0, fmt.Errorf("the program ran off its end")
}

// xnetVM loads prog into x/net/bpf's VM.
func xnetVM(prog []unix.SockFilter) (*bpf.VM, error) {
	ins := make([]bpf.Instruction, len(prog))
	for i, p := range prog {
		ins[i] = bpf.RawInstruction{Op: p.Code, Jt: p.Jt, Jf: p.Jf, K: p.K}.Disassemble()
	}
	return bpf.NewVM(ins)
}

// runXNet runs data on x/net/bpf's VM. Its loads are big-endian (network
// order, for packets): each 32-bit word of seccomp_data is handed to it
// byte-swapped, so that it reads the value the kernel reads.
func runXNet(vm *bpf.VM, data []byte) (uint32, error) {
	be := make([]byte, len(data))
	for i := 0; i+4 <= len(data); i += 4 {
		binary.BigEndian.PutUint32(be[i:], binary.LittleEndian.Uint32(data[i:]))
	}
	n, err := vm.Run(be)
	return uint32(n), err
}

// filter is a compiled program ready for both interpreters.
type filter struct {
	prog []unix.SockFilter
	vm   *bpf.VM
}

func newFilter(tb testing.TB, prog []unix.SockFilter) *filter {
	tb.Helper()
	vm, err := xnetVM(prog)
	if err != nil {
		tb.Fatalf("x/net/bpf refuses the program: %v", err)
	}
	return &filter{prog, vm}
}

// eval runs c through both interpreters and fails tb unless they agree.
func (f *filter) eval(tb testing.TB, c call) uint32 {
	tb.Helper()
	data := seccompData(c)
	k, err := runKernel(f.prog, data)
	if err != nil {
		tb.Fatalf("%+v: %v", c, err)
	}
	x, err := runXNet(f.vm, data)
	if err != nil {
		tb.Fatalf("%+v: x/net/bpf: %v", c, err)
	}
	if k != x {
		tb.Fatalf("%+v: the interpreters disagree: %#x here, %#x in x/net/bpf", c, k, x)
	}
	return k
}

// evaluate runs one call through a program both interpreters load.
func evaluate(tb testing.TB, prog []unix.SockFilter, c call) uint32 {
	tb.Helper()
	return newFilter(tb, prog).eval(tb, c)
}

// The interpreter here agrees with x/net/bpf on programs that use what
// it implements, and refuses what it does not (so that a filter using an
// instruction it does not know fails the tests rather than passes them).
func TestInterpretersAgree(t *testing.T) {
	prog := []unix.SockFilter{
		{Code: ldW, K: offArch},
		{Code: jeqK, K: 7, Jt: 0, Jf: 4},
		{Code: ldW, K: offArgs},
		{Code: andK, K: 0xf0},
		{Code: jset, K: 0x10, Jt: 1},
		{Code: retK, K: 1},
		{Code: retK, K: 2},
	}
	for _, c := range []struct {
		in   call
		want uint32
	}{
		{call{arch: 6}, 2}, // jf 4 lands on the last return
		{call{arch: 7, args: [6]uint64{0x10}}, 2},
		{call{arch: 7, args: [6]uint64{0x2f}}, 1},
		{call{arch: 7, args: [6]uint64{0x1_0000_0000}}, 1}, // the high word is at +4
	} {
		if got := evaluate(t, prog, c.in); got != c.want {
			t.Errorf("%+v = %d, want %d", c.in, got, c.want)
		}
	}
	if _, err := runKernel([]unix.SockFilter{{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_IND}}, make([]byte, 64)); err == nil {
		t.Error("an indirect load ran; the interpreter must refuse what it does not implement")
	}
	if _, err := runKernel([]unix.SockFilter{{Code: ldW, K: 64}, {Code: retK}}, make([]byte, 64)); err == nil {
		t.Error("a load past seccomp_data ran")
	}
}
