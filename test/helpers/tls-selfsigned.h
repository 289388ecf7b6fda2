/* SPDX-License-Identifier: Apache-2.0 */
/* A P-256 key and a self-signed certificate for it, for a test server's
 * context (tls-ownbio, tls-clear): no files to make and remove. */
#pragma once

#include <stdbool.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* False if a step failed. */
static bool
tls_self_signed(SSL_CTX *ctx)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *name;
	bool ok;

	if (!pk || !x) {
		EVP_PKEY_free(pk);
		X509_free(x);
		return false;
	}
	name = X509_get_subject_name(x);
	ok = X509_set_version(x, 2) == 1 &&
	     ASN1_INTEGER_set(X509_get_serialNumber(x), 1) == 1 &&
	     X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
	     X509_gmtime_adj(X509_getm_notAfter(x), 3600) &&
	     X509_set_pubkey(x, pk) == 1 &&
	     X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
					(const unsigned char *)"localhost", -1, -1,
					0) == 1 &&
	     X509_set_issuer_name(x, name) == 1 && X509_sign(x, pk, EVP_sha256()) > 0 &&
	     SSL_CTX_use_certificate(ctx, x) == 1 &&
	     SSL_CTX_use_PrivateKey(ctx, pk) == 1;
	X509_free(x);
	EVP_PKEY_free(pk);
	return ok;
}
