# System-call entry (LSTAR), the lean general path, and the IPC fast path
# for Call and ReplyRecv. syscall_entry.rs explains the design and supplies
# every braced name below as an operand: offsets from core::mem::offset_of!
# and enum values, all checked at compile time there. Interrupts are masked
# throughout (SFMASK clears IF), so nothing here can be interrupted.
#
# On entry the CPU has put the user rip in rcx and rflags in r11 and left
# rsp alone. The current thread's frame (TrapFrame) is the first thing in
# its Thread, so with a Thread's address in a register, frame and Thread
# fields are at their offsets from it: the caller in rsp (general path:
# while storing; fast paths: throughout), the partner in rbx.

# Stores the callee-saved registers into the frame of the Thread at \base.
.macro SE_SAVE_CALLEE_SAVED base
    mov %rbx, {f_rbx}(\base)
    mov %rbp, {f_rbp}(\base)
    mov %r12, {f_r12}(\base)
    mov %r13, {f_r13}(\base)
    mov %r14, {f_r14}(\base)
    mov %r15, {f_r15}(\base)
.endm

# The inverse, for a fast path that gives up.
.macro SE_LOAD_CALLEE_SAVED base
    mov {f_rbx}(\base), %rbx
    mov {f_rbp}(\base), %rbp
    mov {f_r12}(\base), %r12
    mov {f_r13}(\base), %r13
    mov {f_r14}(\base), %r14
    mov {f_r15}(\base), %r15
.endm

# The start of both fast paths: save the caller's rip, rflags, rsp and
# callee-saved registers (the rest of its frame is written by whoever ends
# its wait); rsp = the caller's Thread from here on, the callee-saved
# registers are scratch. Then the first check: a register-only message
# without capabilities, info & 0xffff <= 4.
.macro SE_FAST_START slow
    mov %gs:{pc_current}, %rax
    mov %rcx, {f_rip}(%rax)
    mov %r11, {f_rflags}(%rax)
    mov %rsp, {f_rsp}(%rax)
    mov %rax, %rsp
    SE_SAVE_CALLEE_SAVED %rsp
    cmpw ${short_max}, %si
    ja \slow
.endm

# fast_endpoint: the endpoint capability at own-space slot rdi with \right,
# or a jump to \slow. Out: rbp = DIRECT_MAP_BASE, r12 = the slot's physical
# address, r14 = the endpoint's physical address, r13 = its kernel virtual
# address.
.macro SE_LOOKUP_ENDPOINT right, slow
    # The capability space is a table (as ThreadConfigure and the loader
    # make it); its capability's extra is the number of slots.
    cmpq ${obj_cap_table}, {t_cspace_kind}(%rsp)
    jne \slow
    # rdi < slots. (Two-level addresses are larger. Slot 0, the table
    # header, reads as an empty slot: TableHeader::NOT_A_CAPABILITY.)
    cmp {t_cspace_extra}(%rsp), %rdi
    jae \slow
    # The slot: table + rdi * slot size, reached through the direct map.
    movabs ${direct_map}, %rbp
    imul ${slot_bytes}, %rdi, %r12
    add {t_cspace_object}(%rsp), %r12
    # An endpoint capability (an empty slot's kind is a value no object
    # type has) with the right.
    cmpq ${obj_endpoint}, {s_kind}(%rbp,%r12)
    jne \slow
    testb $\right, {s_rights}(%rbp,%r12)
    jz \slow
    mov {s_object}(%rbp,%r12), %r14
    lea (%rbp,%r14), %r13
.endm

# The partner (rbx) can take over this CPU at once: it has an address
# space, it waits in a system call (its frame has the syscall marker, so
# sysretq can resume it: a frame written by ThreadRegisters or pushed by an
# interrupt needs the slow path's iretq), it belongs to this CPU, and no
# runnable thread has a higher priority (thread::higher_priority_waiting,
# on the run queue's two-level bitmap). The CPU check compares cpu and
# fpu_live as one word: only the caller can have live FPU state (it is the
# running thread), so equal words mean the same CPU and nothing to save;
# otherwise SE_RELEASE_FPU (out of line) saves the caller's state or gives
# up. Clobbers rax, rcx (and r15 when the caller's state is saved).
.macro SE_CHECK_PARTNER slow
    cmpq ${obj_address_space}, {t_vspace_kind}(%rbx)
    jne \slow
    cmpq ${syscall_vector}, {f_vector}(%rbx)
    jne \slow
    mov {t_cpu}(%rsp), %rax
    cmp %rax, {t_cpu}(%rbx)
    jne .Lse_cpu_or_fpu\@
.Lse_fpu_released\@:
    mov %gs:{pc_run_queue}+{rq_summary}, %rax
    test %rax, %rax
    jz .Lse_priority_ok\@
    # Highest runnable priority = 64 * (top bit of summary) + top bit of
    # that bitmap word.
    bsr %rax, %rax
    mov %gs:{pc_run_queue}+{rq_nonempty}(,%rax,8), %rcx
    bsr %rcx, %rcx
    shl $6, %eax
    or %ecx, %eax
    movzbl {t_priority}(%rbx), %ecx
    cmp %ecx, %eax
    ja \slow
.Lse_priority_ok\@:
    .pushsection .text.syscall_entry_fpu, "ax"
.Lse_cpu_or_fpu\@:
    SE_RELEASE_FPU \slow
    jmp .Lse_fpu_released\@
    .popsection
.endm

# The cpu words differ. If only because the caller (rsp) used its vector
# registers in this turn (its fpu_live set), do what fpu::release does:
# save its state (xsaveopt), reset the registers to the clean state
# (xrstor), set CR0.TS, clear both fpu_live marks, so that the partner
# finds them clean and traps on first use. A different CPU, or a CPU
# without XSAVEOPT, takes the slow path. Keep in step with fpu::release.
# Clobbers rax, r15; rdx (message word 0) survives in r15.
.macro SE_RELEASE_FPU slow
    mov {t_cpu}(%rsp), %eax
    cmp %eax, {t_cpu}(%rbx)
    jne \slow
    cmpl $0, {t_fpu_live}(%rsp)
    je \slow
    cmpb ${mode_xsaveopt}, {fpu_mode}(%rip)
    jne \slow
    mov %rdx, %r15
    mov $-1, %eax                           # every component in XCR0
    mov $-1, %edx
    xsaveopt64 {t_fpu}(%rsp)
    xrstor64 {fpu_clean}(%rip)
    mov %r15, %rdx
    mov %cr0, %rax
    or ${cr0_ts}, %rax
    mov %rax, %cr0
    movl $0, {t_fpu_live}(%rsp)
    movq $0, %gs:{pc_fpu_live}
.endm

# thread::enter for rbx: it runs now on this CPU. PerCpu::current (where
# the next system call saves registers), TSS.rsp0 (where the next interrupt
# does: the end of its frame), and CR3 when its address space is not the
# loaded one. Clobbers rax, rcx.
.macro SE_ENTER
    movb ${st_running}, {t_state}(%rbx)
    mov %rbx, %gs:{pc_current}
    lea {ctx}(%rbx), %rax
    mov %gs:{pc_tables}, %rcx
    mov %rax, {tss_rsp0}(%rcx)
    mov {t_vspace_object}(%rbx), %rax
    mov %cr3, %rcx
    cmp %rax, %rcx
    je .Lse_same_space\@
    mov %rax, %cr3
.Lse_same_space\@:
.endm

# Resumes rbx in user mode with sysretq: its callee-saved registers, rip,
# rflags and rsp come from its frame; rax, rdi, rsi, rdx, r10, r8 and r9 are
# what the code before left in them (the message).
.macro SE_SYSRET_TO_RBX locked
    .if \locked == 1
    SE_OPEN_GATES %rbp, %r12d, %r13b
    SE_UNLOCK
    .endif
    .if \locked == 2
    # Leave as a reader (stores stay in order: a lock holder that sees
    # `reader` clear sees everything before).
    movb $0, %gs:{pc_gate}
    .endif
    mov {f_rbp}(%rbx), %rbp
    mov {f_r12}(%rbx), %r12
    mov {f_r13}(%rbx), %r13
    mov {f_r14}(%rbx), %r14
    mov {f_r15}(%rbx), %r15
    mov {f_rip}(%rbx), %rcx
    mov {f_rflags}(%rbx), %r11
    mov {f_rsp}(%rbx), %rsp
    mov {f_rbx}(%rbx), %rbx
    swapgs
    sysretq
.endm

# Opens every online CPU's gate for the lock-free fast path again, or
# leaves it closed where that CPU's thread needs checking (smp::open_gates:
# the holder's last step before SE_UNLOCK). Clobbers \p, \n, \v (a byte
# register).
.macro SE_OPEN_GATES p, n, v
    lea {cpus}(%rip), \p
    mov {online_count}(%rip), \n
.Lse_open\@:
    movb {pc_recheck}(\p), \v
    movb \v, {pc_gate_closed}(\p)
    add ${percpu_stride}, \p
    dec \n
    jnz .Lse_open\@
.endm

# Releases the big kernel lock (smp.rs) on the way out to user mode: the
# next ticket. A plain increment is enough: only the holder writes
# `serving` (x86 keeps stores in order).
.macro SE_UNLOCK
    incl {bkl}+{bkl_serving}(%rip)
.endm

# Enters the fast path as a reader (smp.rs, "Same-CPU IPC without the
# lock") through this CPU's gate: one `lock xadd` adds the call number \nr
# (rax, below 256) to the gate's `reader` byte and returns the old gate;
# the sum's sign is the `closed` byte's top bit. Closed: `reader` back to
# 0 and the entry with the lock, with rax the call number again.
.macro SE_READER_ENTER nr
    lock xadd %ax, %gs:{pc_gate}
    js .Lse_reader_closed\@
    .pushsection .text.syscall_entry_cold, "ax"
.Lse_reader_closed\@:
    movb $0, %gs:{pc_gate}
    mov $\nr, %eax
    jmp syscall_entry_locked_gs
    .popsection
.endm

# The entry and the paths, assembled three times: `syscall_entry` for a
# machine with one CPU online (no lock at all, locked = 0);
# `syscall_entry_locked_body` for several (locked = 1), which opens the
# gates and releases the big kernel lock before every sysretq (the lock was
# taken by `syscall_entry_locked`, below); and the fast paths as readers
# without the lock (locked = 2, `syscall_fast_*_reader`; its general path
# is never entered).
.macro SE_BODY sfx, locked

.p2align 4
syscall_entry\sfx:
    swapgs
syscall_entry\sfx\()_gs:
    cmp ${sys_call}, %rax
    je syscall_fast_call\sfx
    cmp ${sys_reply_recv}, %rax
    je syscall_fast_reply_recv\sfx

# The general path: store rip, rflags and the argument registers into the
# caller's frame, run the Rust dispatcher on this CPU's kernel stack. The
# callee-saved registers stay in the CPU (the Rust code preserves them), the
# user rsp stays in PerCpu::scratch. syscall_from_user returns the caller's
# new rax, or SWITCH (-1) when the caller stops running.
syscall_general\sfx:
    mov %rsp, %gs:{pc_scratch}
    mov %gs:{pc_current}, %rsp              # the caller's Thread
    mov %rcx, {f_rip}(%rsp)
    mov %r11, {f_rflags}(%rsp)
    mov %rax, {f_rax}(%rsp)
    mov %rdi, {f_rdi}(%rsp)
    mov %rsi, {f_rsi}(%rsp)
    mov %rdx, {f_rdx}(%rsp)
    mov %r10, {f_r10}(%rsp)
    mov %r8, {f_r8}(%rsp)
    mov %r9, {f_r9}(%rsp)
    mov %rsp, %rdi                          # syscall_from_user(caller)
    mov %gs:{pc_kernel_stack_top}, %rsp
    call syscall_from_user                  # (DF is clear: SFMASK clears it)
    mov %gs:{pc_current}, %rcx              # still the caller
    cmp ${switch}, %rax
    je .Lse_switch\sfx
    .if \locked == 1
    # Only the caller's frame is read from here on.
    SE_OPEN_GATES %rdi, %esi, %dl
    .endif
    # Back to the caller: rax is the result; the other result registers
    # come from its frame (where the call wrote them, or the arguments).
    mov {f_rdi}(%rcx), %rdi
    mov {f_rsi}(%rcx), %rsi
    mov {f_rdx}(%rcx), %rdx
    mov {f_r10}(%rcx), %r10
    mov {f_r8}(%rcx), %r8
    mov {f_r9}(%rcx), %r9
    mov {f_rflags}(%rcx), %r11
    mov %gs:{pc_scratch}, %rsp
    .if \locked == 1
    SE_UNLOCK
    .endif
    mov {f_rip}(%rcx), %rcx
    swapgs
    sysretq
    # The caller stops running: complete its frame (the callee-saved
    # registers hold its values again), then syscall_continue switches to
    # PerCpu::next or schedules.
.Lse_switch\sfx:
    SE_SAVE_CALLEE_SAVED %rcx
    mov %gs:{pc_scratch}, %rax
    mov %rax, {f_rsp}(%rcx)
    call syscall_continue                   # never returns
    ud2

# ---------------------------------------------------------------------------
# The IPC fast path. Entered with every register as the user left it (but
# rcx, r11): rax the call number, rdi the endpoint slot, rsi the message
# info, rdx, r10, r8, r9 the message words. The message never touches
# memory: these registers become the partner's result registers, only rdi
# (the badge) and rax (0) change. The checks are the conditions under which
# the general path would hand the message over and switch to the partner at
# once; when one fails, syscall_slow_* restores the registers and takes the
# general path, which then does the same the slow way.
# ---------------------------------------------------------------------------

# Call when a receiver waits on the endpoint.
syscall_fast_call\sfx:
    .if \locked == 2
    SE_READER_ENTER {sys_call}
    .endif
    SE_FAST_START syscall_slow_call\sfx
    SE_LOOKUP_ENDPOINT {right_write}, syscall_slow_call\sfx
    # A receiver waits: the queue holds receivers; take the first. (A
    # queue in state Recv is not empty.) Without the lock: and the
    # endpoint is this CPU's (fast_cpu), both in one compare.
    .if \locked == 2
    mov %gs:{pc_endpoint_recv_here}, %cx
    cmp %cx, {ep_state}(%r13)
    .else
    cmpb ${ep_recv}, {ep_state}(%r13)
    .endif
    jne syscall_slow_call\sfx
    mov {ep_head}(%r13), %rbx
    # A receiver with an unanswered call: the slow path aborts that call.
    cmpq $0, {t_caller}(%rbx)
    jne syscall_slow_call\sfx
    SE_CHECK_PARTNER syscall_slow_call\sfx
    # --- No way back from here. ---
    # Unlink the receiver, the queue's head (so its prev is already null).
    mov {t_next}(%rbx), %rax
    mov %rax, {ep_head}(%r13)
    test %rax, %rax
    jnz .Lse_call_more_receivers\sfx
    movq $0, {ep_tail}(%r13)
    movb ${ep_idle}, {ep_state}(%r13)
.Lse_call_unlinked\sfx:
    movq ${queue_none}, {t_queue}(%rbx)
    # Link caller and receiver; the caller waits for an ordinary reply
    # (live to live: the count of live threads is unchanged).
    mov %rsp, {t_caller}(%rbx)
    mov %rbx, {t_reply_from}(%rsp)
    movb $0, {t_reply_is_fault}(%rsp)
    movb ${st_blocked_reply}, {t_state}(%rsp)
    mov {s_badge}(%rbp,%r12), %rdi          # the receiver gets the badge
    SE_ENTER
    xor %eax, %eax
    SE_SYSRET_TO_RBX \locked
.Lse_call_more_receivers\sfx:
    movq $0, {t_prev}(%rax)
    movq $0, {t_next}(%rbx)
    jmp .Lse_call_unlinked\sfx

# ReplyRecv when the caller waits for an ordinary reply and no sender is
# queued: answer it, leave this thread receiving on the endpoint.
syscall_fast_reply_recv\sfx:
    .if \locked == 2
    SE_READER_ENTER {sys_reply_recv}
    .endif
    SE_FAST_START syscall_slow_reply_recv\sfx
    # The thread to answer.
    mov {t_caller}(%rsp), %rbx
    test %rbx, %rbx
    jz syscall_slow_reply_recv\sfx
    SE_LOOKUP_ENDPOINT {right_read}, syscall_slow_reply_recv\sfx
    # A queued sender would be received at once: slow path. Without the
    # lock: the endpoint is this CPU's (fast_cpu) and no thread is queued,
    # both in one compare.
    .if \locked == 2
    mov %gs:{pc_endpoint_idle_here}, %cx
    cmp %cx, {ep_state}(%r13)
    jne syscall_slow_reply_recv\sfx
    .else
    cmpb ${ep_send}, {ep_state}(%r13)
    je syscall_slow_reply_recv\sfx
    .endif
    # A fault reply resumes the faulting instruction, without a message.
    cmpb $0, {t_reply_is_fault}(%rbx)
    jne syscall_slow_reply_recv\sfx
    # A bound notification with bits set is received first.
    mov {t_bound_notification}(%rsp), %rax
    test %rax, %rax
    jnz .Lse_rr_notification\sfx
.Lse_rr_no_notification\sfx:
    SE_CHECK_PARTNER syscall_slow_reply_recv\sfx
    # --- No way back from here. ---
    # Answer: unlink caller and server.
    movq $0, {t_caller}(%rsp)
    movq $0, {t_reply_from}(%rbx)
    # The server waits for the next message: append it to the endpoint's
    # receivers (live to live). It is in no queue now, so its next link is
    # already null.
    movb ${st_blocked_recv}, {t_state}(%rsp)
    mov {ep_tail}(%r13), %rax
    mov %rax, {t_prev}(%rsp)
    movq ${queue_object}, {t_queue}(%rsp)
    mov %r14, {t_queue}+{queue_payload}(%rsp)
    test %rax, %rax
    jnz .Lse_rr_more_receivers\sfx
    mov %rsp, {ep_head}(%r13)
.Lse_rr_linked\sfx:
    mov %rsp, {ep_tail}(%r13)
    movb ${ep_recv}, {ep_state}(%r13)
    .if \locked == 1
    # Under the lock, like ipc::recv: the endpoint is this CPU's now, so
    # that its next calls can take the fast path without the lock.
    mov %gs:{pc_cpu_id}, %eax
    mov %al, {ep_fast_cpu}(%r13)
    .endif
    SE_ENTER
    xor %edi, %edi                          # a reply carries no badge
    xor %eax, %eax
    SE_SYSRET_TO_RBX \locked
.Lse_rr_more_receivers\sfx:
    mov %rsp, {t_next}(%rax)
    jmp .Lse_rr_linked\sfx
.Lse_rr_notification\sfx:
    cmpq $0, {n_word}(%rbp,%rax)
    jne syscall_slow_reply_recv\sfx
    jmp .Lse_rr_no_notification\sfx

# A check failed; nothing has changed but scratch registers. Restore the
# call number, rcx, r11, the callee-saved registers and rsp (from the frame,
# where the fast path put them) and take the general path.
syscall_slow_call\sfx:
    mov ${sys_call}, %eax
    jmp syscall_slow\sfx
syscall_slow_reply_recv\sfx:
    mov ${sys_reply_recv}, %eax
syscall_slow\sfx:
    .if \locked == 2
    # A reader gives up: it leaves, then enters like any other system
    # call, taking the big lock.
    movb $0, %gs:{pc_gate}
    .endif
    mov {f_rip}(%rsp), %rcx
    mov {f_rflags}(%rsp), %r11
    SE_LOAD_CALLEE_SAVED %rsp
    mov {f_rsp}(%rsp), %rsp
    .if \locked == 2
    jmp syscall_entry_locked_gs
    .else
    jmp syscall_general\sfx
    .endif
.endm



.section .text.syscall_entry, "ax"
.code64
.global syscall_entry
.global syscall_entry_locked
.global syscall_entry_general
.global syscall_entry_locked_general
.p2align 4
SE_BODY , 0
.p2align 4
SE_BODY _locked_body, 1
.p2align 4
SE_BODY _reader, 2

# Takes the big kernel lock for the entry \name (the part after its swapgs
# and, in syscall_entry_locked, the reader dispatch; label \name\()_gs),
# then continues at \body with every register as the CPU left it.
# Assembled twice: for syscall_entry_locked (\body = the locked entry with
# its fast paths) and syscall_entry_locked_general (\body = the locked
# general path: pecan.fastpath=off). rax and rdx wait in PerCpu::scratch /
# scratch2 meanwhile (the general path puts the user rsp into scratch only
# later). A ticket not served yet waits in smp_wait_ticket (out of line, on
# the kernel stack, serving the holder's requests). With the lock, the
# caller must still be this CPU's running thread, placed on this CPU, in
# the loaded address space: while it entered (or ran: smp.rs, "recheck"),
# another CPU may have destroyed it (current null: its registers go
# nowhere), stopped it, moved it or taken its address space: then its frame
# is completed so that it restarts the `syscall` instruction (rip - 2) when
# it runs again, and smp_syscall_stopped schedules (.Lse_locked_check).
.macro SE_TAKE_LOCK name, body
\name\()_gs:
    mov %rax, %gs:{pc_scratch}
    mov $1, %eax
    lock xadd %eax, {bkl}+{bkl_next}(%rip)
    cmp %eax, {bkl}+{bkl_serving}(%rip)
    jne .Lse_locked_wait\@
.Lse_locked_have\@:
    # The lock is ours: close every online CPU's gate and wait until no
    # fast path runs there (smp::close_gates), then clear this CPU's
    # recheck: the checks below are that check.
    mov %rdx, %gs:{pc_scratch2}
    lea {cpus}(%rip), %rdx
    mov {online_count}(%rip), %eax
.Lse_close_gate\@:
    lock orb ${closed}, {pc_gate_closed}(%rdx)
.Lse_drain_gate\@:
    cmpb $0, {pc_gate}(%rdx)
    jne .Lse_reader_busy\@
    add ${percpu_stride}, %rdx
    dec %eax
    jnz .Lse_close_gate\@
    movb $0, %gs:{pc_recheck}
    mov %gs:{pc_current}, %rdx
    test %rdx, %rdx
    jz .Lse_locked_check
    cmpb ${st_running}, {t_state}(%rdx)
    jne .Lse_locked_check
    # Moved to another CPU meanwhile: it goes there (thread::resume).
    mov {t_cpu}(%rdx), %eax
    cmp %gs:{pc_cpu_id}, %eax
    jne .Lse_locked_check
    cmpq ${obj_address_space}, {t_vspace_kind}(%rdx)
    jne .Lse_locked_check
    mov %cr3, %rax
    cmp {t_vspace_object}(%rdx), %rax
    jne .Lse_locked_check
    mov %gs:{pc_scratch2}, %rdx
    mov %gs:{pc_scratch}, %rax
    jmp \body

.Lse_reader_busy\@:
    pause
    jmp .Lse_drain_gate\@

.Lse_locked_wait\@:
    mov %rsp, %gs:{pc_scratch2}
    mov %gs:{pc_kernel_stack_top}, %rsp
    push %rdi
    push %rsi
    push %rdx
    push %r10
    push %r8
    push %r9
    push %rcx
    push %r11
    mov %eax, %edi
    call smp_wait_ticket                    # 8 pushes: rsp stays 16-aligned
    pop %r11
    pop %rcx
    pop %r9
    pop %r8
    pop %r10
    pop %rdx
    pop %rsi
    pop %rdi
    mov %gs:{pc_scratch2}, %rsp
    jmp .Lse_locked_have\@
.endm

# The syscall entry while several CPUs are online: Call and ReplyRecv try
# the fast path as a reader first (without the lock); everything else, and
# a reader that finds its gate closed or gives up, takes the big kernel
# lock (a ticket: `lock xadd`, then compare with `serving`), then the
# ordinary locked entry (after its swapgs).
.p2align 4
syscall_entry_locked:
    swapgs
    # Call and ReplyRecv try the fast path without the lock first.
    cmp ${sys_call}, %rax
    je syscall_fast_call_reader
    cmp ${sys_reply_recv}, %rax
    je syscall_fast_reply_recv_reader
    SE_TAKE_LOCK syscall_entry_locked, syscall_entry_locked_body_gs

# The fast path off (pecan.fastpath=off, percpu::disable_fast_path): the
# entries the boot puts into LSTAR instead, one CPU and several. They go
# straight to the general path, which handles Call and ReplyRecv like any
# other call (ipc.rs); neither they nor the general path ever enter a fast
# path, so every IPC takes the Rust path (the lock-free reader included).
.p2align 4
syscall_entry_general:
    swapgs
    jmp syscall_general

.p2align 4
syscall_entry_locked_general:
    swapgs
    SE_TAKE_LOCK syscall_entry_locked_general, syscall_general_locked_body

# A caller that another CPU destroyed, stopped, moved or whose address
# space it took while this one entered (SE_TAKE_LOCK, with the lock).
.Lse_locked_check:
    mov %gs:{pc_scratch2}, %rdx
    mov %gs:{pc_current}, %rax
    test %rax, %rax
    jz .Lse_locked_gone
    mov %rcx, {f_rcx}(%rax)
    sub $2, %rcx                            # back to the syscall instruction
    mov %rcx, {f_rip}(%rax)
    mov %r11, {f_r11}(%rax)
    mov %r11, {f_rflags}(%rax)
    mov %rdi, {f_rdi}(%rax)
    mov %rsi, {f_rsi}(%rax)
    mov %rdx, {f_rdx}(%rax)
    mov %r10, {f_r10}(%rax)
    mov %r8, {f_r8}(%rax)
    mov %r9, {f_r9}(%rax)
    mov %rsp, {f_rsp}(%rax)
    mov %gs:{pc_scratch}, %rcx
    mov %rcx, {f_rax}(%rax)
    SE_SAVE_CALLEE_SAVED %rax
    movq $0, {f_vector}(%rax)               # resumed with iretq
.Lse_locked_gone:
    mov %gs:{pc_kernel_stack_top}, %rsp
    call smp_syscall_stopped                # never returns
    ud2
