/* SPDX-License-Identifier: Apache-2.0 */
/* Many dynamic symbols of several kinds and lengths, for a DT_HASH table
 * of long chains (test-dynsym.c: linked with --hash-style=sysv alone, as
 * libdynsym-sysv-many.so). */
#include "config.h"

#define DIGITS(m, ...)                                                          \
	m(__VA_ARGS__, 0) m(__VA_ARGS__, 1) m(__VA_ARGS__, 2) m(__VA_ARGS__, 3) \
		m(__VA_ARGS__, 4) m(__VA_ARGS__, 5) m(__VA_ARGS__, 6)           \
			m(__VA_ARGS__, 7) m(__VA_ARGS__, 8) m(__VA_ARGS__, 9)
#define DIGITS2(m, ...)                                                         \
	m(__VA_ARGS__, 0) m(__VA_ARGS__, 1) m(__VA_ARGS__, 2) m(__VA_ARGS__, 3) \
		m(__VA_ARGS__, 4) m(__VA_ARGS__, 5) m(__VA_ARGS__, 6)           \
			m(__VA_ARGS__, 7) m(__VA_ARGS__, 8) m(__VA_ARGS__, 9)
#define DIGITS3(m, ...)                                                         \
	m(__VA_ARGS__, 0) m(__VA_ARGS__, 1) m(__VA_ARGS__, 2) m(__VA_ARGS__, 3) \
		m(__VA_ARGS__, 4) m(__VA_ARGS__, 5) m(__VA_ARGS__, 6)           \
			m(__VA_ARGS__, 7) m(__VA_ARGS__, 8) m(__VA_ARGS__, 9)

/* per number: a function, a weak one, a variable with a longer name and
 * a thread-local */
#define DEFINE(x, a, b, c)                                                            \
	int f##a##b##c(void);                                                         \
	int weak_##a##b##c(void);                                                     \
	extern int dynsym_many_variable_with_a_long_name_##c##b##a;                   \
	extern __thread int tls_##b##a##c;                                            \
	__attribute__((visibility("default"))) int f##a##b##c(void)                   \
	{                                                                             \
		return 1;                                                             \
	}                                                                             \
	__attribute__((visibility("default"), weak)) int weak_##a##b##c(void)         \
	{                                                                             \
		return 2;                                                             \
	}                                                                             \
	__attribute__((visibility(                                                    \
		"default"))) int dynsym_many_variable_with_a_long_name_##c##b##a = 3; \
	__attribute__((visibility("default"))) __thread int tls_##b##a##c;
#define LEVEL2(x, a, b) DIGITS3(DEFINE, x, a, b)
#define LEVEL1(x, a)    DIGITS2(LEVEL2, x, a)
DIGITS(LEVEL1, x)
