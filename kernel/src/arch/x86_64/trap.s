# Interrupt and exception entry.
#
# One 16-byte stub per vector (vector v's stub is at trap_stubs + 16*v), so
# the IDT is filled by arithmetic. Each stub makes the stack uniform (pushes
# a zero error code where the CPU pushes none) and pushes its vector number;
# trap_common then saves the general registers to form a `TrapFrame` and
# calls `trap_dispatch(&mut TrapFrame)`. Entries from user mode swap GS so
# the kernel's per-CPU pointer is in GS while in the kernel.

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
    jz 1f
    swapgs
1:  push %r15
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
    mov %rsp, %rdi
    cld
    call trap_dispatch
.global trap_return
trap_return:
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
    testb $3, 24(%rsp)
    jz 2f
    swapgs
2:  add $16, %rsp                  # vector and error code
    iretq
