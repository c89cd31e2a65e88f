# Application-processor start-up code (`smp.rs`). Never executed here: the
# boot CPU copies ap_trampoline_start..ap_trampoline_end to a page below
# 1 MiB (page T), fills in the data block at {tr_data} and sends INIT-SIPI-
# SIPI with vector T >> 12. The CPU starts in real mode with CS = T >> 4 and
# IP = 0, so the 16-bit code addresses the page through CS/DS; from 32-bit
# mode on, %ebx holds T and everything is addressed relative to it.
#
# Data block (written by smp.rs): a GDT (null, 32-bit code 0x08, data 0x10,
# 64-bit code 0x18) and its pointer, the start-up page tables' address
# (identity map of the first 2 MiB plus the kernel half: both are needed at
# the moment paging is switched on), the kernel stack, the 64-bit entry
# point and its argument (the CPU index), and the claim word: 1 while the
# boot CPU waits for this start, which the AP turns into 2 before it uses
# the stack; a boot CPU that gave up turns it into 0, and a late AP halts.

.section .rodata.ap_trampoline, "a"
.global ap_trampoline_start
.global ap_trampoline_end
.code16
ap_trampoline_start:
    cli
    cld
    mov %cs, %ax
    mov %ax, %ds
    mov %ax, %ss
    mov ${tr_data}, %sp                 # a few bytes of stack below the data
    xor %ebx, %ebx
    mov %ax, %bx
    shl $4, %ebx                        # ebx = T
    lgdtl {tr_gdt_ptr}
    mov %cr0, %eax
    or $1, %eax                         # protected mode
    mov %eax, %cr0
    leal (ap_trampoline_32 - ap_trampoline_start)(%ebx), %eax
    pushl $0x08
    pushl %eax
    lretl

.code32
ap_trampoline_32:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    lea {tr_data}(%ebx), %esp
    mov %cr4, %eax
    or $((1 << 5) | (1 << 7) | (1 << 9) | (1 << 10)), %eax   # PAE PGE OSFXSR OSXMMEXCPT
    mov %eax, %cr4
    mov {tr_cr3}(%ebx), %eax
    mov %eax, %cr3
    mov $0xc0000080, %ecx               # EFER: SCE, LME, NXE (as boot.s)
    rdmsr
    or $((1 << 0) | (1 << 8) | (1 << 11)), %eax
    wrmsr
    mov %cr0, %eax
    and $~((1 << 2) | (1 << 3)), %eax   # no x87 emulation, TS clear
    or $((1 << 0) | (1 << 1) | (1 << 16) | (1 << 31)), %eax  # PE MP WP PG
    mov %eax, %cr0
    leal (ap_trampoline_64 - ap_trampoline_start)(%ebx), %eax
    pushl $0x18
    pushl %eax
    lret

.code64
ap_trampoline_64:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %ebx, %ebx                      # zero-extend T
    mov $1, %eax
    mov $2, %ecx
    lock cmpxchg %ecx, {tr_claim}(%rbx)
    jne 1f
    mov {tr_stack}(%rbx), %rsp
    mov {tr_arg}(%rbx), %rdi
    mov {tr_entry}(%rbx), %rax
    call *%rax                          # ap_entry, in the higher half: never returns
1:  cli
    hlt
    jmp 1b
ap_trampoline_end:
