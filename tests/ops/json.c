/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define MAX_DEPTH 64

struct parser {
	const char *p;
	char *err;
	size_t err_len;
	int depth;
};

static struct jv *parse_value(struct parser *ps);

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static struct jv *fail(struct parser *ps, const char *what)
{
	if (!ps->err[0])
		snprintf(ps->err, ps->err_len, "%s at \"%.20s\"", what, ps->p);
	return NULL;
}

static char *parse_string_body(struct parser *ps)
{
	size_t cap = 16, n = 0;
	char *s = malloc(cap);

	if (!s || *ps->p != '"') {
		free(s);
		return NULL;
	}
	ps->p++;
	while (*ps->p && *ps->p != '"') {
		char c = *ps->p++;

		if ((unsigned char)c < 0x20)
			goto bad;
		if (c == '\\') {
			c = *ps->p++;
			switch (c) {
			case '"':
			case '\\':
			case '/':
				break;
			case 'n':
				c = '\n';
				break;
			case 't':
				c = '\t';
				break;
			case 'r':
				c = '\r';
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'u': {
				unsigned v = 0;

				for (int i = 0; i < 4; i++) {
					if (!isxdigit((unsigned char)ps->p[i]))
						goto bad;
					v = v * 16 +
					    (unsigned)(isdigit((unsigned char)ps->p[i])
							       ? ps->p[i] - '0'
							       : (tolower((unsigned char)ps->p[i]) -
								  'a' + 10));
				}
				ps->p += 4;
				c = v < 0x80 ? (char)v : '?';
				break;
			}
			default:
				goto bad;
			}
		}
		if (n + 2 > cap) {
			char *t = realloc(s, cap *= 2);

			if (!t)
				goto bad;
			s = t;
		}
		s[n++] = c;
	}
	if (*ps->p != '"')
		goto bad;
	ps->p++;
	s[n] = '\0';
	return s;
bad:
	free(s);
	return NULL;
}

static struct jv *new_value(enum jtype t)
{
	struct jv *v = calloc(1, sizeof(*v));

	if (v)
		v->type = t;
	return v;
}

static bool append(struct jv *v, char *key, struct jv *item)
{
	struct jv **items = realloc(v->items, (v->n + 1) * sizeof(*items));
	char **keys;

	if (!items)
		return false;
	v->items = items;
	if (v->type == J_OBJ) {
		keys = realloc(v->keys, (v->n + 1) * sizeof(*keys));
		if (!keys)
			return false;
		v->keys = keys;
		keys[v->n] = key;
	}
	items[v->n++] = item;
	return true;
}

static struct jv *parse_container(struct parser *ps, bool object)
{
	struct jv *v = new_value(object ? J_OBJ : J_ARR);
	char close = object ? '}' : ']';

	if (!v || ++ps->depth > MAX_DEPTH)
		goto bad;
	ps->p++;
	skip_ws(ps);
	if (*ps->p == close) {
		ps->p++;
		ps->depth--;
		return v;
	}
	for (;;) {
		char *key = NULL;
		struct jv *item;

		skip_ws(ps);
		if (object) {
			key = parse_string_body(ps);
			if (!key) {
				fail(ps, "bad key");
				goto bad;
			}
			skip_ws(ps);
			if (*ps->p != ':') {
				free(key);
				fail(ps, "expected ':'");
				goto bad;
			}
			ps->p++;
		}
		item = parse_value(ps);
		if (!item || !append(v, key, item)) {
			free(key);
			json_free(item);
			goto bad;
		}
		skip_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			break;
		}
		fail(ps, "expected ',' or a closing bracket");
		goto bad;
	}
	ps->depth--;
	return v;
bad:
	json_free(v);
	return fail(ps, "bad container");
}

static struct jv *parse_value(struct parser *ps)
{
	struct jv *v;
	char *end;

	skip_ws(ps);
	switch (*ps->p) {
	case '{':
		return parse_container(ps, true);
	case '[':
		return parse_container(ps, false);
	case '"':
		v = new_value(J_STR);
		if (v)
			v->str = parse_string_body(ps);
		if (!v || !v->str) {
			json_free(v);
			return fail(ps, "bad string");
		}
		return v;
	case 't':
	case 'f':
	case 'n':
		if (strncmp(ps->p, "true", 4) == 0 || strncmp(ps->p, "null", 4) == 0) {
			v = new_value(ps->p[0] == 'n' ? J_NULL : J_BOOL);
			if (v)
				v->b = ps->p[0] == 't';
			ps->p += 4;
			return v;
		}
		if (strncmp(ps->p, "false", 5) == 0) {
			v = new_value(J_BOOL);
			ps->p += 5;
			return v;
		}
		return fail(ps, "bad literal");
	default:
		if (*ps->p != '-' && !isdigit((unsigned char)*ps->p))
			return fail(ps, "unexpected character");
		v = new_value(J_NUM);
		if (!v)
			return NULL;
		v->num = strtod(ps->p, &end);
		if (end == ps->p) {
			json_free(v);
			return fail(ps, "bad number");
		}
		ps->p = end;
		return v;
	}
}

struct jv *json_parse(const char *text, char *err, size_t err_len)
{
	struct parser ps = {.p = text, .err = err, .err_len = err_len};
	struct jv *v;

	err[0] = '\0';
	v = parse_value(&ps);
	if (!v)
		return NULL;
	skip_ws(&ps);
	if (*ps.p) {
		json_free(v);
		return fail(&ps, "trailing text");
	}
	return v;
}

void json_free(struct jv *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		json_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	free(v);
}

struct jv *jget(const struct jv *obj, const char *key)
{
	for (size_t i = 0; obj && obj->type == J_OBJ && i < obj->n; i++)
		if (strcmp(obj->keys[i], key) == 0)
			return obj->items[i];
	return NULL;
}

struct jv *jat(const struct jv *arr, size_t i)
{
	return arr && arr->type == J_ARR && i < arr->n ? arr->items[i] : NULL;
}

double jnum(const struct jv *v, double dflt)
{
	return v && v->type == J_NUM ? v->num : dflt;
}

const char *jstr(const struct jv *v)
{
	return v && v->type == J_STR ? v->str : "";
}

size_t jlen(const struct jv *v)
{
	return v && (v->type == J_ARR || v->type == J_OBJ) ? v->n : 0;
}
