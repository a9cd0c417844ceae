/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Output: a small streaming JSON writer (pretty-printed, strings escaped per
 * RFC 8259) and number formatting for the tables. rdmafsctl prints one
 * document per run, so the writer's state is global.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "ctl_i.h"

#define JSON_MAX_DEPTH 16

static struct {
	int depth;
	bool has_items[JSON_MAX_DEPTH];
} json;

static void json_indent(void)
{
	for (int i = 0; i < json.depth; i++)
		fputs("  ", stdout);
}

static void json_string_body(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", stdout);
			break;
		case '\\':
			fputs("\\\\", stdout);
			break;
		case '\n':
			fputs("\\n", stdout);
			break;
		case '\t':
			fputs("\\t", stdout);
			break;
		default:
			if (*p < 0x20)
				printf("\\u%04x", *p);
			else
				putchar(*p);
		}
	}
	putchar('"');
}

/* Starts a member (or array element): separator, indentation and key. */
static void json_member(const char *key)
{
	if (json.depth > 0) {
		if (json.has_items[json.depth])
			putchar(',');
		putchar('\n');
		json.has_items[json.depth] = true;
		json_indent();
	}
	if (key) {
		json_string_body(key);
		fputs(": ", stdout);
	}
}

static void json_open(const char *key, char bracket)
{
	json_member(key);
	putchar(bracket);
	if (json.depth + 1 < JSON_MAX_DEPTH)
		json.depth++;
	json.has_items[json.depth] = false;
}

static void json_close(char bracket)
{
	bool items = json.has_items[json.depth];

	if (json.depth > 0)
		json.depth--;
	if (items) {
		putchar('\n');
		json_indent();
	}
	putchar(bracket);
}

void ctl_json_begin_object(const char *key)
{
	json_open(key, '{');
}

void ctl_json_end_object(void)
{
	json_close('}');
}

void ctl_json_begin_array(const char *key)
{
	json_open(key, '[');
}

void ctl_json_end_array(void)
{
	json_close(']');
}

void ctl_json_string(const char *key, const char *value)
{
	json_member(key);
	json_string_body(value ? value : "");
}

void ctl_json_u64(const char *key, uint64_t value)
{
	json_member(key);
	printf("%" PRIu64, value);
}

void ctl_json_i64(const char *key, int64_t value)
{
	json_member(key);
	printf("%" PRId64, value);
}

void ctl_json_double(const char *key, double value)
{
	json_member(key);
	if (isfinite(value))
		printf("%.3f", value);
	else
		fputs("null", stdout);
}

void ctl_json_bool(const char *key, bool value)
{
	json_member(key);
	fputs(value ? "true" : "false", stdout);
}

void ctl_json_null(const char *key)
{
	json_member(key);
	fputs("null", stdout);
}

void ctl_json_finish(void)
{
	putchar('\n');
	fflush(stdout);
}

const char *ctl_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}
