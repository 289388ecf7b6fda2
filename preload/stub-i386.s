# SPDX-License-Identifier: Apache-2.0
#
# The 32-bit (i386) libctxshim.so: an empty shared object.  The shim works
# in 64-bit programs only, but a 32-bit program inherits the same
# LD_PRELOAD or /etc/ld.so.preload entry; its loader, finding a 64-bit
# object there, prints "wrong ELF class: ELFCLASS64" on the program's
# standard error.  An entry with the loader's $LIB token names this object
# to a 32-bit program instead, which its loader maps without a word.  It
# has no code, no symbol and no dependency: nothing of it runs.
#
# A note says what it is (owner "ctxshim", type 1, no descriptor): the
# wrapper writes an entry with $LIB only when the 32-bit file of the
# library's name has it (ctx_stub32 in tools/ctxshim/common.sh), never for
# another 32-bit library put there, whose code every 32-bit program would
# then run.  Allocated, so that the linker puts it in a PT_NOTE segment,
# which the wrapper finds from the program headers alone.
	.section .note.ctxshim,"a",@note
	.balign 4
	.long 8		# namesz: "ctxshim" and its NUL
	.long 0		# descsz
	.long 1		# type
	.asciz "ctxshim"

# The section that marks the stack as not executable: without it, the
# object would ask the loader for an executable stack.
	.section .note.GNU-stack,"",@progbits
