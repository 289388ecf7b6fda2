/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "hex.h"
#include "maps.h"

struct maps_cursor {
	const char *p;
	const char *end;
};

/* At least one digit in base 16 or 10, no sign, no overflow past max. */
static int
maps_number(struct maps_cursor *c, unsigned base, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	bool any = false;

	while (c->p < c->end) {
		int d = base == 16 ? hex_digit_value((uint8_t)*c->p)
				   : (*c->p >= '0' && *c->p <= '9' ? *c->p - '0' : -1);

		if (d < 0)
			break;
		if (v > (max - (uint64_t)d) / base)
			return -EINVAL;
		v = v * base + (uint64_t)d;
		any = true;
		c->p++;
	}
	if (!any)
		return -EINVAL;
	*out = v;
	return 0;
}

static int
maps_expect(struct maps_cursor *c, char ch)
{
	if (c->p >= c->end || *c->p != ch)
		return -EINVAL;
	c->p++;
	return 0;
}

int
maps_parse_line(const char *line, size_t len, struct maps_entry *e)
{
	static const char perm_set[4][2] = {
		{'r', '-'}, {'w', '-'}, {'x', '-'}, {'p', 's'}};
	struct maps_cursor c;
	struct maps_entry m;
	uint64_t major, minor;
	size_t i;

	if (!line || !e)
		return -EINVAL;
	if (len > 0 && line[len - 1] == '\n')
		len--;
	c.p = line;
	c.end = line + len;
	memset(&m, 0, sizeof(m));

	if (maps_number(&c, 16, UINT64_MAX, &m.start) < 0 || maps_expect(&c, '-') < 0 ||
	    maps_number(&c, 16, UINT64_MAX, &m.end) < 0 || maps_expect(&c, ' ') < 0)
		return -EINVAL;
	if (m.end < m.start)
		return -EINVAL;

	if (c.end - c.p < 5)
		return -EINVAL;
	for (i = 0; i < 4; i++) {
		if (c.p[i] != perm_set[i][0] && c.p[i] != perm_set[i][1])
			return -EINVAL;
		m.perms[i] = c.p[i];
	}
	m.perms[4] = '\0';
	c.p += 4;

	if (maps_expect(&c, ' ') < 0 ||
	    maps_number(&c, 16, UINT64_MAX, &m.offset) < 0 ||
	    maps_expect(&c, ' ') < 0 || maps_number(&c, 16, UINT32_MAX, &major) < 0 ||
	    maps_expect(&c, ':') < 0 || maps_number(&c, 16, UINT32_MAX, &minor) < 0 ||
	    maps_expect(&c, ' ') < 0 || maps_number(&c, 10, UINT64_MAX, &m.inode) < 0)
		return -EINVAL;
	m.dev_major = (unsigned)major;
	m.dev_minor = (unsigned)minor;

	/* The kernel pads with spaces up to the pathname column; the name
	 * itself runs to the end of the line and may contain spaces. */
	if (c.p < c.end && *c.p != ' ')
		return -EINVAL;
	while (c.p < c.end && *c.p == ' ')
		c.p++;
	m.path = c.p;
	m.path_len = (size_t)(c.end - c.p);

	*e = m;
	return 0;
}

bool
maps_path_deleted(const char *path, size_t *len)
{
	static const char suffix[] = " (deleted)";
	const size_t sl = sizeof(suffix) - 1;

	if (*len <= sl || memcmp(path + *len - sl, suffix, sl) != 0)
		return false;
	*len -= sl;
	return true;
}
