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
# Only the section that marks the stack as not executable: without it, the
# object would ask the loader for an executable stack.
	.section .note.GNU-stack,"",@progbits
