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

# System-call entry (LSTAR). Interrupts are masked (SFMASK).
#
# The lean path: only what the kernel may read or change is saved into the
# current thread's TrapFrame (PerCpu::context_top - 176): the argument and
# result registers rax, rdi, rsi, rdx, r10, r8, r9, plus rip (rcx), rflags
# (r11) and the user rsp, and the vector 0x100 that marks a syscall frame.
# The callee-saved registers rbx, rbp, r12-r15 stay in the CPU: the Rust
# handler preserves them (SysV ABI), so when it returns 0 ("back to the
# caller") only the result registers are reloaded. When it returns 1 ("run
# someone else"), the callee-saved registers — now holding the user's
# values again — are stored into the frame first, which makes it complete,
# and syscall_continue switches. Invariant: every thread that is not
# running has a complete frame.
.set FRAME_SIZE, 176
.set F_RAX, 0
.set F_RBX, 8
.set F_RDX, 24
.set F_RSI, 32
.set F_RDI, 40
.set F_RBP, 48
.set F_R8, 56
.set F_R9, 64
.set F_R10, 72
.set F_R12, 88
.set F_R13, 96
.set F_R14, 104
.set F_R15, 112
.set F_VECTOR, 120
.set F_RIP, 136
.set F_RFLAGS, 152
.set F_RSP, 160

.global syscall_entry
syscall_entry:
    swapgs
    mov %rsp, %gs:16               # PerCpu::scratch = user rsp
    mov %gs:0, %rsp                # PerCpu::context_top
    sub $FRAME_SIZE, %rsp          # the current thread's TrapFrame
    mov %rax, F_RAX(%rsp)
    mov %rdi, F_RDI(%rsp)
    mov %rsi, F_RSI(%rsp)
    mov %rdx, F_RDX(%rsp)
    mov %r10, F_R10(%rsp)
    mov %r8, F_R8(%rsp)
    mov %r9, F_R9(%rsp)
    mov %rcx, F_RIP(%rsp)
    mov %r11, F_RFLAGS(%rsp)
    mov %gs:16, %rcx
    mov %rcx, F_RSP(%rsp)
    movq $0x100, F_VECTOR(%rsp)
    mov %rsp, %rdi
    mov %rsp, %gs:16               # PerCpu::scratch = the caller's frame
    mov %gs:8, %rsp                # PerCpu::kernel_stack_top
    call syscall_from_user         # (DF is clear: SFMASK clears it)
    mov %gs:16, %rcx               # the caller's frame
    test %rax, %rax
    jnz 1f
    # 0: back to the caller.
    mov F_RAX(%rcx), %rax
    mov F_RDI(%rcx), %rdi
    mov F_RSI(%rcx), %rsi
    mov F_RDX(%rcx), %rdx
    mov F_R10(%rcx), %r10
    mov F_R8(%rcx), %r8
    mov F_R9(%rcx), %r9
    mov F_RFLAGS(%rcx), %r11
    mov F_RSP(%rcx), %rsp
    mov F_RIP(%rcx), %rcx
    swapgs
    sysretq
    # 1 and 2: the caller stops running; complete its frame.
1:  mov %rbx, F_RBX(%rcx)
    mov %rbp, F_RBP(%rcx)
    mov %r12, F_R12(%rcx)
    mov %r13, F_R13(%rcx)
    mov %r14, F_R14(%rcx)
    mov %r15, F_R15(%rcx)
    cmp $1, %rax
    jne 2f
    # 1: let syscall_continue pick and switch.
    call syscall_continue          # never returns
    ud2
    # 2: the fast path already switched to the next thread (PerCpu::current,
    # context_top, TSS, CR3); load its context.
2:  mov %gs:0, %rdi
    sub $FRAME_SIZE, %rdi
    jmp return_to_user

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
