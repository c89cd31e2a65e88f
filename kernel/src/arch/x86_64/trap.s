# Interrupt and exception entry.
#
# One 16-byte stub per vector (vector v's stub is at trap_stubs + 16*v), so
# the IDT is filled by arithmetic. Each stub makes the stack uniform (pushes
# a zero error code where the CPU pushes none) and pushes its vector number;
# trap_common then saves the general registers to form a `TrapFrame` and
# calls `trap_dispatch(&mut TrapFrame)`. Entries from user mode swap GS so
# the kernel's per-CPU pointer is in GS while in the kernel.

# The general registers in TrapFrame order (rax at the lowest address).
.macro PUSH_GPRS
    push %r15
    push %r14
    push %r13
    push %r12
    push %r11
    push %r10
    push %r9
    push %r8
    push %rbp
    push %rdi
    push %rsi
    push %rdx
    push %rcx
    push %rbx
    push %rax
.endm

.macro POP_GPRS
    pop %rax
    pop %rbx
    pop %rcx
    pop %rdx
    pop %rsi
    pop %rdi
    pop %rbp
    pop %r8
    pop %r9
    pop %r10
    pop %r11
    pop %r12
    pop %r13
    pop %r14
    pop %r15
.endm

.section .text.trap, "ax"
.code64
.p2align 4
.global trap_stubs
trap_stubs:
.set vec, 0
.rept 256
    .p2align 4
    .if (vec == 8) || ((vec >= 10) && (vec <= 14)) || (vec == 17) || (vec == 21) || (vec == 29) || (vec == 30)
    .else
        pushq $0
    .endif
    pushq $vec
    jmp trap_common
    .set vec, vec + 1
.endr
.global trap_stubs_end
trap_stubs_end:

trap_common:
    testb $3, 24(%rsp)             # CS of the interrupted context
    jz kernel_trap
    # From user mode: the CPU switched to TSS.rsp0, the top of the current
    # thread's saved-context area, so these pushes fill in its TrapFrame.
    swapgs
    # An interrupt keeps the user's RFLAGS.AC, which would switch SMAP off
    # in the kernel (protect.rs): clear it (clac exists only with SMAP).
    cmpb $0, {smap_enabled}(%rip)
    je 1f
    clac
1:
trap_from_user_frame:
    PUSH_GPRS
    mov %rsp, %rdi
    mov %gs:{pc_kernel_stack_top}, %rsp # this CPU's kernel stack
    cld
    call trap_from_user            # never returns: ends in return_to_user
    ud2

# CSTAR: `syscall` executed in 32-bit compatibility mode. Pecan has no
# 32-bit system-call interface. An Intel CPU raises #UD for it; an AMD CPU
# enters here in ring 0, on the user's rsp and with the user's GS (SFMASK
# has cleared IF, TF and AC, so nothing interrupts this). It is made what
# it is on Intel: an invalid-opcode fault of the thread at the `syscall`
# instruction (rip - 2: its two opcode bytes, prefixes not counted), with
# the frame the CPU would have pushed for #UD, so that the thread's fault
# handler gets an ordinary exception message and the kernel carries on.
# The thread's rcx and r11 are lost (the CPU overwrote them), as for any
# syscall. Normally unreachable: the GDT has no 32-bit user code segment
# (gdt.rs), so no thread gets into compatibility mode at all.
.global syscall_compat_entry
syscall_compat_entry:
    swapgs
    mov %rsp, %gs:{pc_scratch}
    mov %gs:{pc_tables}, %rsp
    mov {tss_rsp0}(%rsp), %rsp     # the end of the current thread's frame
    pushq ${user_data}             # ss
    pushq %gs:{pc_scratch}         # rsp
    pushq %r11                     # rflags
    pushq ${user_code32}           # cs
    lea -2(%rcx), %rcx
    pushq %rcx                     # rip: the syscall instruction
    pushq $0                       # error code
    pushq ${vector_invalid_opcode}
    jmp trap_from_user_frame

kernel_trap:
    PUSH_GPRS
    mov %rsp, %rdi
    cld
    call trap_dispatch
    POP_GPRS
    add $16, %rsp                  # vector and error code
    iretq

# return_to_user(frame: *const TrapFrame) -> !
# Restores a thread's user context. Frames saved by the syscall path
# (vector VECTOR_SYSCALL) return with sysretq (rip and rflags from the
# frame); all others with iretq. Braced names are operands (mod.rs).
# Releases the big kernel lock (smp.rs: one increment, harmless with one
# CPU online, where nobody takes it): the last thing before the way out,
# when nothing but the frame's iret part is read.
.macro RU_UNLOCK
    incl {bkl}+{bkl_serving}(%rip)
.endm

.global return_to_user
return_to_user:
    mov %rdi, %rsp
    POP_GPRS                       # rsp points at the vector now
    cmpq ${vector_syscall}, (%rsp)
    jne 1f
    mov {f_rip}-{f_vector}(%rsp), %rcx
    mov {f_rflags}-{f_vector}(%rsp), %r11
    mov {f_rsp}-{f_vector}(%rsp), %rsp
    RU_UNLOCK
    swapgs
    sysretq
    # Any other frame: after iretq the thread runs, and a running thread's
    # frame carries the syscall marker (see syscall_entry.rs), so that the
    # syscall path need not store it.
1:  movq ${vector_syscall}, (%rsp)
    add $16, %rsp
    RU_UNLOCK
    swapgs
    iretq
