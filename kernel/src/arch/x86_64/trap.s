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
    PUSH_GPRS
    mov %rsp, %rdi
    mov %gs:8, %rsp                # this CPU's kernel stack (PerCpu::kernel_stack_top)
    cld
    call trap_from_user            # never returns: ends in return_to_user
    ud2

kernel_trap:
    PUSH_GPRS
    mov %rsp, %rdi
    cld
    call trap_dispatch
    POP_GPRS
    add $16, %rsp                  # vector and error code
    iretq

# System-call entry (LSTAR). Interrupts are masked (SFMASK). Builds the same
# TrapFrame as an interrupt from user mode, directly in the current thread's
# saved-context area (PerCpu::context_top), marked with vector 0x100.
.global syscall_entry
syscall_entry:
    swapgs
    mov %rsp, %gs:16               # PerCpu::scratch = user rsp
    mov %gs:0, %rsp                # PerCpu::context_top
    pushq $0x23                    # ss  = USER_DATA
    pushq %gs:16                   # rsp
    push %r11                      # rflags
    pushq $0x2b                    # cs  = USER_CODE64
    push %rcx                      # rip
    pushq $0                       # error code
    pushq $0x100                   # vector: SYSCALL
    PUSH_GPRS
    mov %rsp, %rdi
    mov %gs:8, %rsp                # PerCpu::kernel_stack_top
    cld
    call syscall_from_user         # never returns
    ud2

# return_to_user(frame: *const TrapFrame) -> !
# Restores a thread's user context. Contexts saved by `syscall` return with
# sysretq (rip and rflags from the frame); all others with iretq.
.global return_to_user
return_to_user:
    mov %rdi, %rsp
    POP_GPRS
    cmpq $0x100, (%rsp)
    jne 1f
    mov 16(%rsp), %rcx             # rip
    mov 32(%rsp), %r11             # rflags
    mov 40(%rsp), %rsp             # user rsp
    swapgs
    sysretq
1:  add $16, %rsp
    swapgs
    iretq
