// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Client keys in the metadata service: the record CLIENT_ADD, CLIENT_LIST
 * and CLIENT_REVOKE keep, and what a keyed caller may do (meta_handle_as()):
 * no administration, no change when read-only, root squashed, nothing once
 * revoked.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "rdmafs_common.h"
#include "test_meta_util.h"

#define ROOT 1

static int setup(void **state)
{
	struct tm_env *e = calloc(1, sizeof(*e));

	tm_setup(e, 1);
	tm_caller = NULL;
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct tm_env *e = *state;

	tm_caller = NULL;
	tm_teardown(e);
	free(e);
	return 0;
}

static int client_add(struct meta *m, const char *name, uint32_t flags, uint64_t *serial)
{
	Rdmafs__ClientAddReq req = RDMAFS__CLIENT_ADD_REQ__INIT;
	Rdmafs__ClientAddResp *resp = NULL;
	int ret;

	req.name = (char *)name;
	req.flags = flags;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_CLIENT_ADD, &req,
		      &rdmafs__client_add_resp__descriptor, (void **)&resp);
	if (ret == 0) {
		assert_non_null(resp->client);
		assert_string_equal(resp->client->name, name);
		assert_int_equal(resp->client->flags, flags);
		assert_false(resp->client->revoked);
		*serial = resp->client->serial;
		rdmafs__client_add_resp__free_unpacked(resp, NULL);
	}
	return ret;
}

static int client_revoke(struct meta *m, const char *name, uint64_t *serial)
{
	Rdmafs__ClientRevokeReq req = RDMAFS__CLIENT_REVOKE_REQ__INIT;
	Rdmafs__ClientRevokeResp *resp = NULL;
	int ret;

	req.name = (char *)name;
	ret = tm_call(m, RDMAFS__METHOD__METHOD_CLIENT_REVOKE, &req,
		      &rdmafs__client_revoke_resp__descriptor, (void **)&resp);
	if (ret == 0) {
		assert_true(resp->client->revoked);
		assert_true(resp->client->revoked_unix_ms > 0);
		*serial = resp->client->serial;
		rdmafs__client_revoke_resp__free_unpacked(resp, NULL);
	}
	return ret;
}

static int client_list(struct meta *m, Rdmafs__ClientListResp **resp)
{
	Rdmafs__ClientListReq req = RDMAFS__CLIENT_LIST_REQ__INIT;

	return tm_call(m, RDMAFS__METHOD__METHOD_CLIENT_LIST, &req,
		       &rdmafs__client_list_resp__descriptor, (void **)resp);
}

static void test_record(void **state)
{
	struct tm_env *e = *state;
	Rdmafs__ClientListResp *list;
	Rdmafs__HeartbeatResp *hb;
	uint64_t alice, bob, again, revoked;

	/* a store without keys: epoch 0, nothing listed */
	assert_int_equal(client_list(e->m, &list), 0);
	assert_int_equal(list->n_clients, 0);
	assert_int_equal(list->keys_epoch, 0);
	assert_true(list->done);
	rdmafs__client_list_resp__free_unpacked(list, NULL);

	assert_int_equal(client_add(e->m, "alice", RDMAFS_KEY_READ_ONLY, &alice), 0);
	assert_int_equal(client_add(e->m, "alice", 0, &again), -EEXIST);
	assert_int_equal(client_add(e->m, "bob", RDMAFS_KEY_ROOT_SQUASH, &bob), 0);
	assert_true(bob > alice);
	assert_int_equal(client_add(e->m, "a b", 0, &again), -EINVAL);
	assert_int_equal(client_add(e->m, "", 0, &again), -EINVAL);
	assert_int_equal(client_add(e->m, "carol", 0x8, &again), -EINVAL);

	assert_int_equal(client_revoke(e->m, "alice", &revoked), 0);
	assert_int_equal(revoked, alice);
	assert_int_equal(client_revoke(e->m, "alice", &revoked), -ENOENT);
	assert_int_equal(meta_key_revoked(e->m, alice), 1);
	assert_int_equal(meta_key_revoked(e->m, bob), 0);
	assert_int_equal(meta_key_revoked(e->m, 999), 0);
	/* a revoked name may get a new key, with a new serial */
	assert_int_equal(client_add(e->m, "alice", 0, &again), 0);
	assert_true(again > bob);

	/* it all survives a restart, and daemons see the epoch in heartbeats */
	tm_reopen(e);
	assert_int_equal(client_list(e->m, &list), 0);
	assert_int_equal(list->n_clients, 3);
	assert_int_equal(list->keys_epoch, 4);
	assert_string_equal(list->clients[0]->name, "alice");
	assert_true(list->clients[0]->revoked);
	assert_string_equal(list->clients[1]->name, "bob");
	assert_int_equal(list->clients[1]->flags, RDMAFS_KEY_ROOT_SQUASH);
	assert_false(list->clients[2]->revoked);
	rdmafs__client_list_resp__free_unpacked(list, NULL);
	assert_int_equal(tm_heartbeat(e->m, 1, 1000, 0, &hb), 0);
	assert_int_equal(hb->keys_epoch, 4);
	rdmafs__heartbeat_resp__free_unpacked(hb, NULL);
}

static void test_read_only(void **state)
{
	struct tm_env *e = *state;
	struct meta_caller ro = {.keyed = true, .serial = 50, .flags = RDMAFS_KEY_READ_ONLY};
	struct tm_attr a;
	uint64_t handle, serial;
	Rdmafs__ClientListResp *list;
	int64_t ino = tm_mkfile(e->m, NULL, ROOT, "f", 0644);

	assert_true(ino > 0);
	tm_caller = &ro;
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &a), 0);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "f", &a), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &a), -EROFS);
	assert_int_equal(tm_mkfile(e->m, NULL, ROOT, "g", 0644), -EROFS);
	assert_int_equal(tm_unlink(e->m, NULL, ROOT, "f", NULL), -EROFS);
	assert_int_equal(tm_setxattr(e->m, NULL, (uint64_t)ino, "user.x", "1", 1, 0), -EROFS);
	assert_int_equal(tm_update_size(e->m, (uint64_t)ino, 10, NULL, &a), -EROFS);
	assert_int_equal(tm_open(e->m, NULL, (uint64_t)ino, O_RDWR, &handle), -EROFS);
	assert_int_equal(tm_open(e->m, NULL, (uint64_t)ino, O_RDONLY | O_TRUNC, &handle), -EROFS);
	assert_int_equal(tm_open(e->m, NULL, (uint64_t)ino, O_RDONLY, &handle), 0);
	assert_int_equal(tm_release(e->m, handle, (uint64_t)ino, NULL), 0);
	/* administration needs the secret, read-only or not */
	assert_int_equal(client_list(e->m, &list), -EPERM);
	assert_int_equal(tm_heartbeat(e->m, 1, 1000, 0, NULL), -EPERM);
	ro.flags = 0;
	assert_int_equal(client_add(e->m, "x", 0, &serial), -EPERM);
	assert_int_equal(
		tm_set_state(e->m, 1, RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING, false, NULL),
		-EPERM);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "d", 0755, &a), 0);
}

static void test_root_squash(void **state)
{
	struct tm_env *e = *state;
	struct meta_caller squash = {.keyed = true, .serial = 51, .flags = RDMAFS_KEY_ROOT_SQUASH};
	struct tm_cred root, user;
	struct tm_attr a;

	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "pub", 01777, &a), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, ROOT, "private", 0700, &a), 0);
	tm_caller = &squash;
	/* uid 0, as a cred and as no cred at all, becomes 65534 */
	assert_int_equal(tm_mkdir(e->m, tm_user(&root, 0, 0), a.ino, "x", 0755, NULL), -EACCES);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "pub", &a), 0);
	assert_int_equal(tm_mkdir(e->m, tm_user(&root, 0, 0), a.ino, "x", 0755, &a), 0);
	assert_int_equal(a.uid, RDMAFS_SQUASH_ID);
	assert_int_equal(a.gid, RDMAFS_SQUASH_ID);
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "pub", &a), 0);
	assert_int_equal(tm_mkdir(e->m, NULL, a.ino, "y", 0755, &a), 0);
	assert_int_equal(a.uid, RDMAFS_SQUASH_ID);
	/* a squashed caller cannot name another owner for a new inode */
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "pub", &a), 0);
	assert_int_equal(tm_mkfile(e->m, tm_user(&user, 1000, 100), a.ino, "mine", 0644) > 0, 1);
	assert_int_equal(tm_lookup(e->m, NULL, a.ino, "mine", &a), 0);
	assert_int_equal(a.uid, 1000);
	/* other users are who they say */
	assert_int_equal(tm_lookup(e->m, NULL, ROOT, "pub", &a), 0);
	assert_int_equal(tm_mkdir(e->m, tm_user(&user, 1000, 100), a.ino, "z", 0755, &a), 0);
	assert_int_equal(a.uid, 1000);
	assert_int_equal(a.gid, 100);
}

static void test_revoked(void **state)
{
	struct tm_env *e = *state;
	struct meta_caller who = {.keyed = true};
	struct tm_attr a;
	uint64_t serial, revoked;

	assert_int_equal(client_add(e->m, "dave", 0, &serial), 0);
	who.serial = serial;
	tm_caller = &who;
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &a), 0);
	tm_caller = NULL;
	assert_int_equal(client_revoke(e->m, "dave", &revoked), 0);
	tm_caller = &who;
	/* a connection that was open when the key was revoked gets nothing more */
	assert_int_equal(tm_getattr(e->m, NULL, ROOT, &a), -EKEYREVOKED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_root_squash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoked, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
