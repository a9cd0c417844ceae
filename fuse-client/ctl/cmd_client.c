// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rdmafsctl client add|list|revoke: client keys. The metadata service keeps
 * the record (name, serial, flags, revoked); the key itself is derived here
 * from the cluster secret (xprt_key_derive()), as every daemon derives it
 * again in HELLO, so it is never stored or sent anywhere but the key file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "xprt.h"
#include "ctl_i.h"

/* A Unix time in ms as UTC text; "" for 0. */
static void print_time(uint64_t unix_ms, char *buf, size_t len)
{
	time_t t = (time_t)(unix_ms / 1000u);
	struct tm tm;

	buf[0] = '\0';
	if (unix_ms && gmtime_r(&t, &tm))
		strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void client_json(const Rdmafs__ClientInfo *ci)
{
	char flags[64];

	ctl_json_begin_object(NULL);
	ctl_json_string("name", ci->name);
	ctl_json_u64("serial", ci->serial);
	ctl_json_string("flags", rdmafs_key_flags_text(ci->flags, flags, sizeof(flags)));
	ctl_json_bool("read_only", ci->flags & RDMAFS_KEY_READ_ONLY);
	ctl_json_bool("root_squash", ci->flags & RDMAFS_KEY_ROOT_SQUASH);
	ctl_json_bool("revoked", ci->revoked);
	ctl_json_u64("created_unix_ms", ci->created_unix_ms);
	ctl_json_u64("revoked_unix_ms", ci->revoked_unix_ms);
	ctl_json_end_object();
}

static int client_add(struct ctl *c, const char *name)
{
	Rdmafs__ClientAddReq req = RDMAFS__CLIENT_ADD_REQ__INIT;
	Rdmafs__ClientAddResp *resp = NULL;
	struct xprt_key key;
	char path[4096], why[1024], flags[64];
	const char *out = ctl_out_file;
	int ret;

	if (!xprt_key_name_valid(name)) {
		ctl_err("client name \"%s\": 1 to %u printable characters without spaces", name,
			XPRT_KEY_NAME_MAX);
		return CTL_EXIT_USAGE;
	}
	if (!c->secret) {
		ctl_err("client add derives the key from the cluster secret: give it with -s "
			"FILE, not a client key");
		return CTL_EXIT_USAGE;
	}
	if (!out) {
		snprintf(path, sizeof(path), "%s.key", name);
		out = path;
	}
	/* refuse an existing file before the service records a key nobody gets */
	if (access(out, F_OK) == 0) {
		ctl_err("%s", rdmafs_key_strerror(out, -EEXIST, why, sizeof(why)));
		return CTL_EXIT_USAGE;
	}
	req.name = (char *)name;
	if (ctl_flags & CTL_FLAG_READ_ONLY)
		req.flags |= RDMAFS_KEY_READ_ONLY;
	if (ctl_flags & CTL_FLAG_ROOT_SQUASH)
		req.flags |= RDMAFS_KEY_ROOT_SQUASH;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_CLIENT_ADD, &req.base,
			    &rdmafs__client_add_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret == -EEXIST)
		ctl_err("client %s has a key already: revoke it first (rdmafsctl client revoke "
			"%s)",
			name, name);
	else if (ret && ret != -EPERM && ctl_exit_for(ret) != CTL_EXIT_UNREACHABLE)
		ctl_err("client add %s: %s", name, ctl_strerror(ret));
	if (ret)
		return ctl_exit_for(ret);
	if (!resp->client || !resp->client->name || strcmp(resp->client->name, name) ||
	    resp->client->flags != req.flags) {
		ctl_err("the metadata service answered client add with another client");
		rfs_meta_free(&resp->base);
		return CTL_EXIT_FAILED;
	}
	memset(&key, 0, sizeof(key));
	snprintf(key.name, sizeof(key.name), "%s", name);
	key.serial = resp->client->serial;
	key.flags = resp->client->flags;
	xprt_key_derive(c->secret, c->secret_len, key.name, key.serial, key.flags, key.key);
	ret = rdmafs_key_write(out, &key);
	sodium_memzero(&key, sizeof(key));
	if (ret) {
		ctl_err("cannot write the key file %s: %s (the key is recorded: revoke it with "
			"rdmafsctl client revoke %s)",
			out, strerror(-ret), name);
		rfs_meta_free(&resp->base);
		return CTL_EXIT_FAILED;
	}
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_string("key_file", out);
		ctl_json_begin_array("clients");
		client_json(resp->client);
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	} else {
		printf("client %s: key serial %llu (%s) written to %s\n", name,
		       (unsigned long long)resp->client->serial,
		       rdmafs_key_flags_text(resp->client->flags, flags, sizeof(flags)), out);
	}
	rfs_meta_free(&resp->base);
	return CTL_EXIT_OK;
}

static int client_list(struct ctl *c)
{
	Rdmafs__ClientListReq req = RDMAFS__CLIENT_LIST_REQ__INIT;
	bool done = false;
	char flags[64], created[32], revoked[32];
	int ret;

	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_begin_array("clients");
	} else {
		printf("%-24s %8s  %-22s %-8s %-20s %s\n", "NAME", "SERIAL", "FLAGS", "STATE",
		       "CREATED", "REVOKED");
	}
	while (!done) {
		Rdmafs__ClientListResp *resp = NULL;

		ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_CLIENT_LIST, &req.base,
				    &rdmafs__client_list_resp__descriptor,
				    (ProtobufCMessage **)&resp);
		if (ret) {
			if (ret != -EPERM && ret != -EKEYREVOKED &&
			    ctl_exit_for(ret) != CTL_EXIT_UNREACHABLE)
				ctl_err("client list: %s", ctl_strerror(ret));
			return ctl_exit_for(ret);
		}
		for (size_t i = 0; i < resp->n_clients; i++) {
			const Rdmafs__ClientInfo *ci = resp->clients[i];

			if (!ci->name || ci->serial <= req.start_after) {
				ctl_err("the metadata service sent a bad client list");
				rfs_meta_free(&resp->base);
				return CTL_EXIT_FAILED;
			}
			req.start_after = ci->serial;
			if (c->json) {
				client_json(ci);
				continue;
			}
			print_time(ci->created_unix_ms, created, sizeof(created));
			print_time(ci->revoked_unix_ms, revoked, sizeof(revoked));
			printf("%-24s %8llu  %-22s %-8s %-20s %s\n", ci->name,
			       (unsigned long long)ci->serial,
			       rdmafs_key_flags_text(ci->flags, flags, sizeof(flags)),
			       ci->revoked ? "revoked" : "valid", created,
			       ci->revoked ? revoked : "-");
		}
		done = resp->done || resp->n_clients == 0;
		rfs_meta_free(&resp->base);
	}
	if (c->json) {
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	}
	return CTL_EXIT_OK;
}

static int client_revoke(struct ctl *c, const char *name)
{
	Rdmafs__ClientRevokeReq req = RDMAFS__CLIENT_REVOKE_REQ__INIT;
	Rdmafs__ClientRevokeResp *resp = NULL;
	int ret;

	req.name = (char *)name;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_CLIENT_REVOKE, &req.base,
			    &rdmafs__client_revoke_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret == -ENOENT)
		ctl_err("client %s has no key that is not revoked already", name);
	else if (ret && ret != -EPERM && ctl_exit_for(ret) != CTL_EXIT_UNREACHABLE)
		ctl_err("client revoke %s: %s", name, ctl_strerror(ret));
	if (ret)
		return ctl_exit_for(ret);
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_begin_array("clients");
		if (resp->client)
			client_json(resp->client);
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	} else {
		printf("client %s: key serial %llu revoked (the metadata service refuses it now, "
		       "every daemon within a heartbeat)\n",
		       name, resp->client ? (unsigned long long)resp->client->serial : 0ull);
	}
	rfs_meta_free(&resp->base);
	return CTL_EXIT_OK;
}

int ctl_cmd_client(struct ctl *c, int argc, char **argv)
{
	const char *sub = argv[0];
	bool add = strcmp(sub, "add") == 0;

	if ((ctl_flags & (CTL_FLAG_READ_ONLY | CTL_FLAG_ROOT_SQUASH | CTL_FLAG_OUT)) && !add) {
		ctl_err("--read-only, --root-squash and --out go with client add");
		return CTL_EXIT_USAGE;
	}
	if (add && argc == 2)
		return client_add(c, argv[1]);
	if (strcmp(sub, "list") == 0 && argc == 1)
		return client_list(c);
	if (strcmp(sub, "revoke") == 0 && argc == 2)
		return client_revoke(c, argv[1]);
	ctl_err("usage: rdmafsctl client add [--read-only] [--root-squash] [--out FILE] NAME | "
		"client list | client revoke NAME");
	return CTL_EXIT_USAGE;
}
