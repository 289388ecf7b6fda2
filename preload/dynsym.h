/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <link.h>
#include <stdbool.h>

/* Does the loaded object that info describes (from dl_iterate_phdr())
 * define name, as a symbol of any type and binding but local?  Looked up
 * as ld.so looks it up, in the object's hash table read from memory (an
 * object without one defines nothing for dlsym() either), so that no code
 * of the object runs: dlsym() would call an IFUNC resolver of that name.
 * Every read stays inside the object's loaded segments. */
bool ctxshim_dynsym_defines(const struct dl_phdr_info *info, const char *name);

/* The same for a definition of name without a symbol version (the object
 * has no DT_VERSYM, or the symbol's is the base one and not hidden): one
 * that ld.so binds a reference of any version to, as to name@GLIBC_2.3.2
 * an interposer's unversioned pthread_cond_wait. */
bool ctxshim_dynsym_unversioned(const struct dl_phdr_info *info, const char *name);

/* That object's DT_SONAME, or NULL if it has none; read as
 * ctxshim_dynsym_defines() reads, inside the object's segments. */
const char *ctxshim_dynsym_soname(const struct dl_phdr_info *info);

/* Does one of that object's loaded segments hold addr? */
bool ctxshim_object_holds(const struct dl_phdr_info *info, const void *addr);
