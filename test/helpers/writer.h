/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Test writers of OTEP-4947 thread records, one program per TLS access
 * model of otel_thread_ctx_v1.  Every program shares writer-common.c; only
 * where the variable is defined and how it is accessed differ, behind these
 * two calls. */

struct writer_tls_ops {
	/* Shown in the READY line: tlsdesc, gd, ie, le, dlopen. */
	const char *model;
	/* Called once on the main thread after the worker threads exist and
	 * before any of them touches the variable (the dlopen writer loads
	 * its library here); may be NULL.  Returns 0 or -1. */
	int (*load)(const struct writer_tls_ops *ops, int argc, char **argv);
	void (*set)(void *rec);
	void *(*get)(void);
};

int writer_main(int argc, char **argv, struct writer_tls_ops *ops);

/* In the libraries (writer-tls-lib.c) and in the executables that define
 * or use the variable themselves. */
void writer_tls_set(void *rec);
void *writer_tls_get(void);

/* The two accessors above for a file that declares otel_thread_ctx_v1
 * itself (its TLS model is the point of each such file): OTEP-4947
 * publication, compiler fences around a volatile store.  attr: e.g. the
 * visibility of a library's accessors. */
#define WRITER_TLS_ACCESSORS(attr)                             \
	attr void writer_tls_set(void *rec)                    \
	{                                                      \
		atomic_signal_fence(memory_order_seq_cst);     \
		*(void *volatile *)&otel_thread_ctx_v1 = rec;  \
		atomic_signal_fence(memory_order_seq_cst);     \
	}                                                      \
	attr void *writer_tls_get(void)                        \
	{                                                      \
		return *(void *volatile *)&otel_thread_ctx_v1; \
	}

/* main() of an executable whose accessors are WRITER_TLS_ACCESSORS(). */
#define WRITER_TLS_MAIN(model_)                       \
	int main(int argc, char **argv)               \
	{                                             \
		struct writer_tls_ops ops = {         \
			.model = model_,              \
			.set = writer_tls_set,        \
			.get = writer_tls_get,        \
		};                                    \
		return writer_main(argc, argv, &ops); \
	}
