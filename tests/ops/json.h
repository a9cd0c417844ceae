/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A small strict JSON parser (RFC 8259, without \u escapes beyond ASCII)
 * for checking rdmafsctl --json output in the ops tests.
 */
#ifndef RDMAFS_TEST_OPS_JSON_H
#define RDMAFS_TEST_OPS_JSON_H

#include <stdbool.h>
#include <stddef.h>

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype type;
	bool b;
	double num;
	char *str;
	size_t n;    /* items of an array or object */
	char **keys; /* objects */
	struct jv **items;
};

/* Parses the whole of @text; NULL (and a message in @err) if it is not one JSON value. */
struct jv *json_parse(const char *text, char *err, size_t err_len);
void json_free(struct jv *v);
/* Member @key of an object, or NULL. */
struct jv *jget(const struct jv *obj, const char *key);
/* Item @i of an array, or NULL. */
struct jv *jat(const struct jv *arr, size_t i);
/* Conveniences: NULL-safe, with a default for a missing or mistyped value. */
double jnum(const struct jv *v, double dflt);
const char *jstr(const struct jv *v);
size_t jlen(const struct jv *v);

#endif
