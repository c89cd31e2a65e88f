# pecan_memcpy and pecan_memset; lib.rs explains the design and supplies the
# braced names ({vector}: the byte that allows the vector path, {vector_min}:
# the size from which it is taken). SysV calling convention; both clobber
# only registers the caller does not expect preserved: rcx, rdx, rsi, rdi,
# r8, r9 and, on the vector path, ymm0-ymm15 (all call-clobbered; code built
# for x86_64-unknown-none never keeps a value in them).

# Loads 16 ymm registers from the 512 bytes at \off\base.
.macro MEMOPS_LOAD512 off, base
    .irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
        vmovdqu \off+\i*32\base, %ymm\i
    .endr
.endm

# Stores them to the 512 bytes at \off\base with \op (vmovdqa when aligned).
.macro MEMOPS_STORE512 op, off, base
    .irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
        \op %ymm\i, \off+\i*32\base
    .endr
.endm

# For \w <= n (edx) < 2 * \w: copies the first and the last \w bytes
# (overlapping) through \a and \b (registers of that width) and returns.
# Smaller n goes to \smaller.
.macro MEMOPS_COPY_EDGES w, a, b, smaller
    cmp $\w, %edx
    jb \smaller
    mov (%rsi), \a
    mov -\w(%rsi,%rdx), \b
    mov \a, (%rdi)
    mov \b, -\w(%rdi,%rdx)
    ret
.endm

# The same for memset: stores \r (the pattern, \w bytes wide) twice.
.macro MEMOPS_FILL_EDGES w, r, smaller
    cmp $\w, %edx
    jb \smaller
    mov \r, (%rdi)
    mov \r, -\w(%rdi,%rdx)
    ret
.endm

# Stores ymm0 to the 512 bytes at \off\base with \op.
.macro MEMOPS_FILL512 op, off, base
    .irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
        \op %ymm0, \off+\i*32\base
    .endr
.endm

# ---------------------------------------------------------------------------
# pecan_memcpy(dst: rdi, src: rsi, n: rdx) -> rax = dst
# ---------------------------------------------------------------------------
.section .text.pecan_memcpy, "ax", @progbits
.globl pecan_memcpy
.type pecan_memcpy, @function
.p2align 5
pecan_memcpy:
    mov %rdi, %rax
    cmp $16, %rdx
    jb .Lmemcpy_below16
    cmp ${vector_min}, %rdx
    jae .Lmemcpy_large
# 16 <= n: whole quadwords, then the last 8 bytes once more (overlapping).
.Lmemcpy_qwords:
    mov -8(%rsi,%rdx), %r8
    lea -8(%rdi,%rdx), %r9
    mov %rdx, %rcx
    shr $3, %rcx
    rep movsq
    mov %r8, (%r9)
    ret
# n < 16: the first and the last 8, 4, 2 or 1 bytes (overlapping).
.Lmemcpy_below16:
    MEMOPS_COPY_EDGES 8, %r8, %r9, .Lmemcpy_below8
.Lmemcpy_below8:
    MEMOPS_COPY_EDGES 4, %r8d, %r9d, .Lmemcpy_below4
.Lmemcpy_below4:
    test %edx, %edx
    jz .Lmemcpy_done
    movzbl (%rsi), %r8d
    cmp $2, %edx
    jb .Lmemcpy_one
    movzwl -2(%rsi,%rdx), %r9d
    mov %r9w, -2(%rdi,%rdx)
.Lmemcpy_one:
    mov %r8b, (%rdi)
.Lmemcpy_done:
    ret
# n >= vector_min: 32 bytes unaligned, then from the destination's next
# 32-byte boundary blocks of 1024 (aligned stores), then at most one block
# of 512 from there and the last 512 bytes of the buffer (overlapping).
.Lmemcpy_large:
    cmpb $0, {vector}(%rip)
    je .Lmemcpy_qwords
    vmovdqu (%rsi), %ymm0
    vmovdqu %ymm0, (%rdi)
    lea (%rsi,%rdx), %r8                # the ends
    lea (%rdi,%rdx), %r9
    mov %rdi, %rcx                      # bytes to the boundary
    neg %rcx
    and $31, %rcx
    add %rcx, %rsi
    add %rcx, %rdi
    sub %rcx, %rdx
    mov %rdx, %rcx                      # bytes in whole 1024-byte blocks
    and $-1024, %rcx
    add %rcx, %rsi                      # index from -rcx up to 0
    add %rcx, %rdi
    neg %rcx
.Lmemcpy_loop:
    MEMOPS_LOAD512 0, (%rsi,%rcx)
    MEMOPS_STORE512 vmovdqa, 0, (%rdi,%rcx)
    MEMOPS_LOAD512 512, (%rsi,%rcx)
    MEMOPS_STORE512 vmovdqa, 512, (%rdi,%rcx)
    add $1024, %rcx
    jnz .Lmemcpy_loop
    mov %r8, %rdx                       # bytes left: < 1024
    sub %rsi, %rdx
    cmp $512, %rdx
    jbe .Lmemcpy_last
    MEMOPS_LOAD512 0, (%rsi)
    MEMOPS_STORE512 vmovdqa, 0, (%rdi)
.Lmemcpy_last:
    MEMOPS_LOAD512 -512, (%r8)
    MEMOPS_STORE512 vmovdqu, -512, (%r9)
    vzeroupper
    ret
.size pecan_memcpy, . - pecan_memcpy

# ---------------------------------------------------------------------------
# pecan_memset(dst: rdi, c: esi, n: rdx) -> rax = dst
# ---------------------------------------------------------------------------
.section .text.pecan_memset, "ax", @progbits
.globl pecan_memset
.type pecan_memset, @function
.p2align 5
pecan_memset:
    movzbl %sil, %esi                   # the byte in all eight bytes of rsi
    movabs $0x0101010101010101, %rax
    imul %rax, %rsi
    mov %rdi, %rax
    cmp $16, %rdx
    jb .Lmemset_below16
    cmp ${vector_min}, %rdx
    jae .Lmemset_large
# 16 <= n: the last 8 bytes, then whole quadwords from the start.
.Lmemset_qwords:
    mov %rsi, -8(%rdi,%rdx)
    mov %rdx, %rcx
    shr $3, %rcx
    mov %rax, %rdx                      # dst, the result
    mov %rsi, %rax
    rep stosq
    mov %rdx, %rax
    ret
# n < 16: the first and the last 8, 4, 2 or 1 bytes (overlapping).
.Lmemset_below16:
    MEMOPS_FILL_EDGES 8, %rsi, .Lmemset_below8
.Lmemset_below8:
    MEMOPS_FILL_EDGES 4, %esi, .Lmemset_below4
.Lmemset_below4:
    test %edx, %edx
    jz .Lmemset_done
    mov %sil, (%rdi)
    cmp $2, %edx
    jb .Lmemset_done
    mov %si, -2(%rdi,%rdx)
.Lmemset_done:
    ret
# n >= vector_min: as memcpy, with ymm0 holding the pattern.
.Lmemset_large:
    cmpb $0, {vector}(%rip)
    je .Lmemset_qwords
    push %rsi
    vbroadcastsd (%rsp), %ymm0
    pop %rsi
    vmovdqu %ymm0, (%rdi)
    lea (%rdi,%rdx), %r9                # the end
    mov %rdi, %rcx                      # bytes to the boundary
    neg %rcx
    and $31, %rcx
    add %rcx, %rdi
    sub %rcx, %rdx
    mov %rdx, %rcx                      # bytes in whole 1024-byte blocks
    and $-1024, %rcx
    add %rcx, %rdi                      # index from -rcx up to 0
    neg %rcx
.Lmemset_loop:
    MEMOPS_FILL512 vmovdqa, 0, (%rdi,%rcx)
    MEMOPS_FILL512 vmovdqa, 512, (%rdi,%rcx)
    add $1024, %rcx
    jnz .Lmemset_loop
    mov %r9, %rdx                       # bytes left: < 1024
    sub %rdi, %rdx
    cmp $512, %rdx
    jbe .Lmemset_last
    MEMOPS_FILL512 vmovdqa, 0, (%rdi)
.Lmemset_last:
    MEMOPS_FILL512 vmovdqu, -512, (%r9)
    vzeroupper
    ret
.size pecan_memset, . - pecan_memset
