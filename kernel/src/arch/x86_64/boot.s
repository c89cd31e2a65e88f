# PVH entry: QEMU `-kernel` (and Xen) start here in 32-bit protected mode,
# paging off, interrupts off, flat segments, %ebx = physical address of the
# hvm_start_info structure, no stack.
#
# This code runs identity-mapped at its load address. It zeroes .bss, builds
# throw-away page tables (identity and direct map of the low 4 GiB, the kernel
# image at KERNEL_VMA) from 2 MiB pages, enters long mode and jumps to
# `kernel_entry` in the higher half with the start-info address as argument.
# The Rust side replaces these tables with precise ones as soon as it has a
# frame allocator.

.set KERNEL_VMA, 0xffffffff80000000
.set PTE_P_W, 0x003
.set PTE_P_W_PS, 0x083
.set CR4_PAE, 1 << 5
.set CR4_PGE, 1 << 7
.set CR4_OSFXSR, 1 << 9
.set CR4_OSXMMEXCPT, 1 << 10
.set EFER_MSR, 0xc0000080
.set EFER_SCE_LME_NXE, (1 << 0) | (1 << 8) | (1 << 11)
.set CR0_PE_MP_WP_PG, (1 << 0) | (1 << 1) | (1 << 16) | (1 << 31)

.section .note.Xen, "a", @note
.p2align 2
    .long 4                       # namesz: "Xen\0"
    .long 8                       # descsz: 8-byte entry address for ELF64
    .long 18                      # XEN_ELFNOTE_PHYS32_ENTRY
    .asciz "Xen"
    .p2align 2
    .quad _pvh_start
    .p2align 2

.section .boot.text, "ax"
.code32
.global _pvh_start
_pvh_start:
    cli
    cld
    mov %ebx, %esi                 # start info, kept in %esi until kernel_entry
    lea boot_stack_top, %esp

    # Long mode is the one CPU feature we cannot run without; say so on the
    # serial port instead of triple-faulting silently.
    mov $0x80000000, %eax
    cpuid
    cmp $0x80000001, %eax
    jb no_long_mode
    mov $0x80000001, %eax
    cpuid
    test $(1 << 29), %edx
    jz no_long_mode

    # Zero the kernel's .bss (the loader may not) and the boot page tables.
    xor %eax, %eax
    mov $__bss_start_phys, %edi
    mov $__bss_end_phys, %ecx
    sub %edi, %ecx
    shr $2, %ecx
    rep stosl
    mov $boot_tables_start, %edi
    mov $boot_tables_end, %ecx
    sub %edi, %ecx
    shr $2, %ecx
    rep stosl

    # 4 page directories = 2048 entries of 2 MiB covering 0..4 GiB.
    mov $boot_pd, %edi
    xor %ecx, %ecx
1:  mov %ecx, %eax
    shl $21, %eax
    or $PTE_P_W_PS, %eax
    mov %eax, (%edi,%ecx,8)
    mov %ecx, %eax
    shr $11, %eax                  # bits 32+ of (i << 21)
    mov %eax, 4(%edi,%ecx,8)
    inc %ecx
    cmp $2048, %ecx
    jne 1b

    # PDPT for the low 4 GiB: entries 0..3 -> the four directories.
    mov $boot_pdpt_low, %edi
    mov $boot_pd + PTE_P_W, %eax
    mov %eax, 0(%edi)
    add $4096, %eax
    mov %eax, 8(%edi)
    add $4096, %eax
    mov %eax, 16(%edi)
    add $4096, %eax
    mov %eax, 24(%edi)

    # PDPT for the top 2 GiB: entry 510 -> first GiB (kernel image).
    mov $boot_pdpt_high, %edi
    mov $boot_pd + PTE_P_W, %eax
    mov %eax, 510*8(%edi)

    # PML4: 0 = identity (for this code), 256 = direct map, 511 = kernel.
    mov $boot_pml4, %edi
    mov $boot_pdpt_low + PTE_P_W, %eax
    mov %eax, 0(%edi)
    mov %eax, 256*8(%edi)
    mov $boot_pdpt_high + PTE_P_W, %eax
    mov %eax, 511*8(%edi)

    mov %cr4, %eax
    or $(CR4_PAE | CR4_PGE | CR4_OSFXSR | CR4_OSXMMEXCPT), %eax
    mov %eax, %cr4
    mov $boot_pml4, %eax
    mov %eax, %cr3
    mov $EFER_MSR, %ecx
    rdmsr
    or $EFER_SCE_LME_NXE, %eax
    wrmsr
    mov %cr0, %eax
    and $~((1 << 2) | (1 << 3)), %eax   # no x87 emulation, clear TS
    or $CR0_PE_MP_WP_PG, %eax
    mov %eax, %cr0

    lgdt boot_gdt_ptr
    ljmp $0x08, $long_mode_start

no_long_mode:
    mov $no_long_mode_msg, %esi
    mov $0x3f8, %dx
2:  lodsb
    test %al, %al
    jz 3f
    out %al, %dx
    jmp 2b
3:  mov $0x11, %al                 # isa-debug-exit: failure
    mov $0xf4, %dx
    out %al, %dx
4:  hlt
    jmp 4b

.code64
long_mode_start:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %ax, %ax
    mov %ax, %fs
    mov %ax, %gs
    movabs $boot_kernel_stack_top, %rsp
    mov %esi, %edi                 # zero-extends: start-info physical address
    movabs $kernel_entry, %rax
    call *%rax
5:  hlt
    jmp 5b

.section .boot.data, "a"
.p2align 3
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff       # 0x08: 64-bit code
    .quad 0x00cf92000000ffff       # 0x10: data
boot_gdt_end:
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .long boot_gdt
no_long_mode_msg:
    .asciz "Pecan: this CPU has no 64-bit long mode; cannot boot\r\n"

.section .boot.bss, "aw", @nobits
.p2align 12
boot_tables_start:
boot_pml4:      .skip 4096
boot_pdpt_low:  .skip 4096
boot_pdpt_high: .skip 4096
boot_pd:        .skip 4 * 4096
boot_tables_end:
    .skip 4096
boot_stack_top:

# The boot CPU's kernel stack, in the higher half. The page below it stays
# unmapped once the kernel has its own page tables, so an overflow faults
# (and, since the fault cannot be pushed, becomes a double fault on IST1).
.section .bss.boot_stack, "aw", @nobits
.p2align 12
.global boot_kernel_stack_guard
boot_kernel_stack_guard:
    .skip 4096
.global boot_kernel_stack_bottom
boot_kernel_stack_bottom:
    .skip 65536
.global boot_kernel_stack_top
boot_kernel_stack_top:
