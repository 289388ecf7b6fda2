/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <curl/curl.h>

/* libcurlearly.so (curl-early-lib.c): the handle its constructor made,
 * with a CURLOPT_HTTPHEADER list and no URL yet. */
extern CURL *curl_early_handle;
