/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafsctl's session, on the client core's daemon handles (rdmafs_fs.h, struct rfs_daemon):
 * one on the metadata service and one on each daemon it talks to (opened on
 * first use, sharing one transport context and the registered buffers of
 * chunk copies), and the cluster map. Every field that comes off the wire is
 * checked before it is used.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xprt.h"
#include "rdmafs_common.h"
#include "rdmafs_fs.h"
#include "fs_client_i.h"
#include "ctl_i.h"

/* The largest piece of a chunk moved at once. */
#define COPY_PIECE (1u << 20)
#define COPY_BUFS  2u

void ctl_err(const char *fmt, ...)
{
	va_list ap;

	fputs("rdmafsctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Without --log-level or -v the transport says nothing: rdmafsctl says what failed. */
static void transport_quiet(enum xprt_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

const char *ctl_strerror(int err)
{
	return xprt_strerror(err);
}

int ctl_exit_for(int err)
{
	switch (err) {
	case 0:
		return CTL_EXIT_OK;
	case -ECONNREFUSED:
	case -ETIMEDOUT:
	case -ECONNRESET:
	case -ENOTCONN:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -EHOSTDOWN:
	case -ENODEV:
	case -EPROTO:
	case -ECONNABORTED:
		return CTL_EXIT_UNREACHABLE;
	case -EACCES:
	case -EKEYREVOKED:
		/* HELLO failed: our secret or key is not the cluster's, a configuration error */
		return CTL_EXIT_USAGE;
	default:
		return CTL_EXIT_FAILED;
	}
}

void ctl_uuid_format(const uint8_t *uuid, char out[37])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < RDMAFS_UUID_LEN; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[uuid[i] >> 4];
		out[o++] = hex[uuid[i] & 15];
	}
	out[o] = '\0';
}

const char *ctl_state_name(uint32_t state)
{
	return rdmafs_daemon_state_name(state);
}

int ctl_session_open(struct ctl *c)
{
	if (c->verbose)
		rdmafs_log_hook_xprt();
	else
		xprt_set_log(transport_quiet, NULL, XPRT_LOG_ERR);
	return CTL_EXIT_OK;
}

static void daemons_free(struct ctl_daemon *list, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		rfs_daemon_close(list[i].handle);
		for (size_t a = 0; a < list[i].address_count; a++)
			free(list[i].addresses[a]);
	}
	free(list);
}

static void map_free(struct ctl_map *map)
{
	daemons_free(map->daemons, map->count);
	daemons_free(map->removed, map->removed_count);
	memset(map, 0, sizeof(*map));
}

void ctl_session_close(struct ctl *c)
{
	map_free(&c->map);
	rfs_daemon_close(c->meta);
	c->meta = NULL;
}

/*
 * Opens a handle on @uri: the first one (the metadata service's) brings the
 * transport context and the registered buffers of chunk copies, the others
 * share them.
 */
static int handle_open(struct ctl *c, const char *uri, struct rfs_daemon **out)
{
	struct rfs_daemon_options o;

	rfs_daemon_options_init(&o);
	o.uri = uri;
	o.secret = c->secret;
	o.secret_len = c->secret_len;
	o.key_file = c->key_file;
	o.name = "rdmafsctl";
	o.call_timeout_ms = c->timeout_ms;
	o.connect_timeout_ms = c->timeout_ms;
	o.buf_size = COPY_PIECE;
	o.buf_count = COPY_BUFS;
	o.share = c->meta;
	return rfs_daemon_open(&o, out);
}

int ctl_meta(struct ctl *c, struct rfs_daemon **out)
{
	int ret;

	if (!c->meta) {
		ret = handle_open(c, c->meta_uri, &c->meta);
		if (ret) {
			c->meta = NULL;
			if (ret == -EKEYREVOKED)
				ctl_err("key for client %s was revoked (the metadata service at "
					"%s refused it): ask for a new key",
					c->key_name, c->meta_uri);
			else if (ret == -EACCES && c->key_file)
				ctl_err("the metadata service at %s refused the key for client %s "
					"in %s: it was made for another cluster secret, or altered",
					c->meta_uri, c->key_name, c->key_file);
			else if (ret == -EACCES)
				ctl_err("the metadata service at %s refused our secret (or we "
					"refused its): check --secret-file",
					c->meta_uri);
			else if (ret == -ENOMEM)
				ctl_err("cannot register %u buffers of %u bytes for %s: %s (raise "
					"the memlock limit: ulimit -l)",
					COPY_BUFS, COPY_PIECE, c->meta_uri, xprt_strerror(ret));
			else
				ctl_err("cannot reach the metadata service at %s: %s", c->meta_uri,
					xprt_strerror(ret));
			return ret;
		}
	}
	*out = c->meta;
	return 0;
}

int ctl_meta_call(struct ctl *c, uint32_t method, const ProtobufCMessage *req,
		  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
	struct rfs_daemon *meta;
	int ret = ctl_meta(c, &meta);

	*resp = NULL;
	if (ret)
		return ret;
	ret = rfs_daemon_call(meta, method, req, resp_desc, resp);
	if (ret == -EPERM && c->key_file)
		ctl_err("the metadata service refused this command to the key for client %s: "
			"administration needs the cluster secret (-s FILE)",
			c->key_name);
	else if (ret == -EKEYREVOKED)
		ctl_err("key for client %s was revoked", c->key_name);
	else if (ret == -EOPNOTSUPP)
		ctl_err("%s does not serve method %u: is it the metadata service, and as new as "
			"this rdmafsctl?",
			c->meta_uri, method);
	else if (ctl_exit_for(ret) == CTL_EXIT_UNREACHABLE)
		ctl_err("the metadata service at %s: %s", c->meta_uri, xprt_strerror(ret));
	return ret;
}

/* Copies one DaemonInfo off the wire into @d, checking it. */
static int daemon_from(const Rdmafs__DaemonInfo *info, struct ctl_daemon *d)
{
	memset(d, 0, sizeof(*d));
	if (!info || info->uuid.len != RDMAFS_UUID_LEN || info->n_addresses > CTL_MAX_ADDRESSES)
		return -EBADMSG;
	memcpy(d->uuid, info->uuid.data, RDMAFS_UUID_LEN);
	ctl_uuid_format(d->uuid, d->uuid_text);
	for (size_t i = 0; i < info->n_addresses; i++) {
		if (!info->addresses[i] || !info->addresses[i][0] ||
		    strlen(info->addresses[i]) > 255)
			return -EBADMSG;
		d->addresses[i] = strdup(info->addresses[i]);
		if (!d->addresses[i])
			return -ENOMEM;
		d->address_count++;
	}
	if ((info->name && strlen(info->name) > CTL_MAX_LABEL) ||
	    (info->disk_id && strlen(info->disk_id) > CTL_MAX_LABEL) ||
	    (info->host && strlen(info->host) > CTL_MAX_LABEL) ||
	    (info->rack && strlen(info->rack) > CTL_MAX_LABEL))
		return -EBADMSG;
	snprintf(d->host, sizeof(d->host), "%s", info->host ? info->host : "");
	snprintf(d->rack, sizeof(d->rack), "%s", info->rack ? info->rack : "");
	snprintf(d->name, sizeof(d->name), "%s", info->name ? info->name : "");
	snprintf(d->disk_id, sizeof(d->disk_id), "%s", info->disk_id ? info->disk_id : "");
	snprintf(d->label, sizeof(d->label), "%.*s", d->name[0] ? CTL_MAX_LABEL : 8,
		 d->name[0] ? d->name : d->uuid_text);
	d->hosts_metadata = info->hosts_metadata;
	d->capacity_bytes = info->capacity_bytes;
	d->used_bytes = info->used_bytes;
	d->state = (uint32_t)info->state;
	d->last_heartbeat_unix_ms = info->last_heartbeat_unix_ms;
	d->chunks_missing = info->chunks_missing;
	return 0;
}

int ctl_map_load(struct ctl *c, bool reload)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *resp;
	struct ctl_map map = {0};
	int ret;

	if (c->map_loaded && !reload)
		return 0;
	/* the removed too, kept apart: to name them, never to list or contact them */
	req.include_removed = true;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req.base,
			    &rdmafs__get_cluster_map_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret) {
		/* a failed connect (no c->meta) was reported already */
		if (c->meta && ctl_exit_for(ret) != CTL_EXIT_UNREACHABLE)
			ctl_err("cannot read the cluster map from %s: %s", c->meta_uri,
				xprt_strerror(ret));
		return ret;
	}
	map.epoch = resp->epoch;
	if (resp->cluster_id.len == RDMAFS_UUID_LEN)
		ctl_uuid_format(resp->cluster_id.data, map.cluster_id);
	map.daemons = calloc(resp->n_daemons + 1, sizeof(*map.daemons));
	map.removed = calloc(resp->n_daemons + 1, sizeof(*map.removed));
	if (!map.daemons || !map.removed) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < resp->n_daemons; i++) {
		bool removed =
			resp->daemons[i] &&
			resp->daemons[i]->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED;
		struct ctl_daemon *d =
			removed ? &map.removed[map.removed_count++] : &map.daemons[map.count++];

		ret = daemon_from(resp->daemons[i], d);
		if (ret) {
			ctl_err("the cluster map from %s has a malformed daemon entry",
				c->meta_uri);
			goto out_free;
		}
	}
	/* Keep the handles we already have on daemons still in the map. */
	for (size_t i = 0; i < map.count; i++) {
		struct ctl_daemon *old = ctl_map_find(c, map.daemons[i].uuid);

		if (old && old->handle) {
			map.daemons[i].handle = old->handle;
			old->handle = NULL;
		}
	}
	map_free(&c->map);
	c->map = map;
	memset(&map, 0, sizeof(map));
	c->map_loaded = true;
out_free:
	map_free(&map);
	rdmafs__get_cluster_map_resp__free_unpacked(resp, NULL);
	return ret;
}

struct ctl_daemon *ctl_map_find(struct ctl *c, const uint8_t *uuid)
{
	for (size_t i = 0; i < c->map.count; i++)
		if (memcmp(c->map.daemons[i].uuid, uuid, RDMAFS_UUID_LEN) == 0)
			return &c->map.daemons[i];
	for (size_t i = 0; i < c->map.removed_count; i++)
		if (memcmp(c->map.removed[i].uuid, uuid, RDMAFS_UUID_LEN) == 0)
			return &c->map.removed[i];
	return NULL;
}

/* @arg as lower-case hex without dashes into @out; false if it is not hex. */
static bool hex_key(const char *arg, char *out, size_t size)
{
	size_t n = 0;

	for (const char *p = arg; *p; p++) {
		if (*p == '-')
			continue;
		if (!isxdigit((unsigned char)*p) || n + 1 >= size)
			return false;
		out[n++] = (char)tolower((unsigned char)*p);
	}
	out[n] = '\0';
	return n > 0;
}

static bool address_matches(const char *address, const char *arg)
{
	const char *rest = strstr(address, "://");

	return strcmp(address, arg) == 0 || (rest && strcmp(rest + 3, arg) == 0);
}

/* The daemons of @list matching @arg (see ctl_resolve()); the last one in *@found. */
static size_t matches_in(struct ctl_daemon *list, size_t count, const char *arg,
			 struct ctl_daemon **found)
{
	char key[40], hex[33];
	size_t matches = 0;
	bool is_hex = hex_key(arg, key, sizeof(key));

	/* a name is exact, and wins */
	for (size_t i = 0; i < count; i++) {
		if (list[i].name[0] && strcmp(list[i].name, arg) == 0) {
			*found = &list[i];
			return 1;
		}
	}
	for (size_t i = 0; is_hex && i < count; i++) {
		struct ctl_daemon *d = &list[i];

		for (int b = 0; b < RDMAFS_UUID_LEN; b++)
			snprintf(hex + 2 * b, 3, "%02x", d->uuid[b]);
		if (strncmp(hex, key, strlen(key)) == 0) {
			*found = d;
			matches++;
		}
	}
	for (size_t i = 0; matches == 0 && i < count; i++) {
		struct ctl_daemon *d = &list[i];

		for (size_t a = 0; a < d->address_count; a++) {
			if (address_matches(d->addresses[a], arg)) {
				*found = d;
				matches++;
				break;
			}
		}
	}
	return matches;
}

int ctl_resolve_any(struct ctl *c, const char *arg, struct ctl_daemon **out)
{
	struct ctl_daemon *found = NULL;
	size_t matches;
	int ret = ctl_map_load(c, false);

	if (ret)
		return ret;
	matches = matches_in(c->map.daemons, c->map.count, arg, &found);
	if (matches == 0)
		matches = matches_in(c->map.removed, c->map.removed_count, arg, &found);
	if (matches == 1) {
		*out = found;
		return 0;
	}
	if (matches == 0) {
		ctl_err("no daemon in the cluster map matches \"%s\" (give a name, a UUID, a "
			"unique "
			"UUID prefix or an address; `rdmafsctl daemons` lists them)",
			arg);
		return -ENOENT;
	}
	ctl_err("\"%s\" matches %zu daemons; give more of the UUID", arg, matches);
	return -EINVAL;
}

int ctl_resolve(struct ctl *c, const char *arg, struct ctl_daemon **out)
{
	int ret = ctl_resolve_any(c, arg, out);

	if (!ret && (*out)->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
		ctl_err("daemon %s was removed from the cluster (rdmafsctl remove): it is no "
			"longer "
			"in the cluster map",
			(*out)->uuid_text);
		return -EIDRM;
	}
	return ret;
}

int ctl_daemon(struct ctl *c, struct ctl_daemon *d, struct rfs_daemon **out)
{
	struct rfs_daemon *meta;
	int ret;

	if (d->handle) {
		*out = d->handle;
		return 0;
	}
	/* the map says nobody answers there: do not wait a connect timeout to learn it */
	if (d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN ||
	    d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED) {
		d->conn_address = d->address_count ? d->addresses[0] : "(no address)";
		d->conn_error = -EHOSTDOWN;
		return -EHOSTDOWN;
	}
	/* the handles share the metadata service's transport context */
	ret = ctl_meta(c, &meta);
	if (ret)
		return ret;
	ret = -EHOSTUNREACH;
	d->conn_address = "(no address)";
	for (size_t a = 0; a < d->address_count; a++) {
		d->conn_address = d->addresses[a];
		ret = handle_open(c, d->addresses[a], &d->handle);
		if (ret == 0) {
			d->conn_error = 0;
			*out = d->handle;
			return 0;
		}
		d->handle = NULL;
	}
	d->conn_error = ret;
	return ret;
}

/* Seconds since @d's last heartbeat, -1 if it never sent one. */
static double heartbeat_age_sec(const struct ctl_daemon *d)
{
	struct timespec ts;
	uint64_t now;

	if (!d->last_heartbeat_unix_ms)
		return -1;
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	return now > d->last_heartbeat_unix_ms ? (double)(now - d->last_heartbeat_unix_ms) / 1000
					       : 0;
}

bool ctl_daemon_skipped(const struct ctl_daemon *d, int err)
{
	return err == -EHOSTDOWN && d->conn_error == -EHOSTDOWN &&
	       (d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN ||
		d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED);
}

const char *ctl_daemon_strerror(const struct ctl_daemon *d, int err)
{
	if (ctl_daemon_skipped(d, err))
		return d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN
			       ? "down in the cluster map: not contacted"
			       : "removed from the cluster: not contacted";
	return ctl_strerror(err);
}

void ctl_report_daemon_error(const struct ctl_daemon *d, int err)
{
	double age = heartbeat_age_sec(d);

	if (!ctl_daemon_skipped(d, err)) {
		ctl_err("daemon %s at %s: %s", d->uuid_text,
			d->conn_address ? d->conn_address : "-", ctl_strerror(err));
		return;
	}
	if (age < 0)
		ctl_err("daemon %s at %s is %s in the cluster map (never heartbeated): skipped, "
			"not contacted",
			d->uuid_text, d->conn_address, ctl_state_name(d->state));
	else
		ctl_err("daemon %s at %s is %s in the cluster map (last heartbeat %.0f s ago): "
			"skipped, not contacted",
			d->uuid_text, d->conn_address, ctl_state_name(d->state), age);
}

int ctl_chunk_commit_inode(struct rfs_daemon *d, uint64_t ino)
{
	struct rfs_chunk_sel sel = {
		.inode = ino, .generation = RFS_GENERATION_ADMIN, .range = true};

	return rfs_chunk_commit(d, &sel);
}

int ctl_chunk_remove_inode(struct rfs_daemon *d, uint64_t ino)
{
	struct rfs_chunk_sel sel = {
		.inode = ino, .generation = RFS_GENERATION_ADMIN, .range = true};

	return rfs_chunk_remove(d, &sel, NULL, NULL);
}

int ctl_set_layout(struct ctl *c, uint64_t ino, const Rdmafs__Layout *old,
		   const uint8_t *const *daemons, size_t n, const uint32_t *domains)
{
	Rdmafs__SetLayoutReq req = RDMAFS__SET_LAYOUT_REQ__INIT;
	ProtobufCBinaryData list[RDMAFS_MAX_STRIPE];
	ProtobufCMessage *resp;
	int ret;

	if (n > RDMAFS_MAX_STRIPE)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		list[i].data = (uint8_t *)daemons[i];
		list[i].len = RDMAFS_UUID_LEN;
	}
	req.ino = ino;
	req.expected_daemons = old->daemons;
	req.n_expected_daemons = old->n_daemons;
	req.daemons = list;
	req.n_daemons = n;
	req.domains = (uint32_t *)domains;
	req.n_domains = domains ? n : 0;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_SET_LAYOUT, &req.base,
			    &rdmafs__set_layout_resp__descriptor, &resp);
	if (!ret)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

int ctl_layout_generation(struct ctl *c, uint64_t ino, uint64_t *generation)
{
	Rdmafs__GetattrReq req = RDMAFS__GETATTR_REQ__INIT;
	Rdmafs__AttrResp *resp;
	int ret;

	req.ino = ino;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_GETATTR, &req.base,
			    &rdmafs__attr_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	if (resp->layout)
		*generation = resp->layout->generation;
	else
		ret = -EPROTO; /* a service that predates generations */
	rdmafs__attr_resp__free_unpacked(resp, NULL);
	return ret;
}

int ctl_fence_layout(struct ctl *c, uint64_t ino, const Rdmafs__Layout *l, uint64_t fence,
		     struct ctl_fences *f)
{
	int ret;

	f->n = 0;
	for (size_t i = 0; i < l->n_daemons && i < RDMAFS_MAX_STRIPE; i++) {
		struct ctl_daemon *d = ctl_map_find(c, l->daemons[i].data);
		struct rfs_daemon *h;

		/* a DOWN daemon serves nothing and is in no live chain; one not in the map,
		 * or REMOVED, is gone */
		if (!d || d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN ||
		    d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
			continue;
		ret = ctl_daemon(c, d, &h);
		if (!ret)
			ret = rfs_chunk_fence(h, ino, fence, false, NULL);
		if (ret) {
			ctl_err("inode %" PRIu64 ": cannot fence it on %s: %s", ino, d->uuid_text,
				ctl_strerror(ret));
			ctl_fences_lift(c, ino, fence, f, "the command");
			f->n = 0;
			return ret;
		}
		f->d[f->n] = d;
		f->h[f->n++] = h;
	}
	return 0;
}

void ctl_fences_lift(struct ctl *c, uint64_t ino, uint64_t fence, const struct ctl_fences *f,
		     const char *what)
{
	uint64_t generation = 0;
	int ret = ctl_layout_generation(c, ino, &generation);

	if (ret == -ENOENT || (!ret && generation >= fence))
		return; /* gone (numbers are never reused), or switched: harmless */
	for (size_t i = 0; i < f->n; i++) {
		int lift = ret ? ret : rfs_chunk_fence(f->h[i], ino, fence, true, NULL);

		if (lift)
			ctl_err("inode %" PRIu64 ": cannot lift its fence on %s (%s): its "
				"writers wait until %s is run again",
				ino, f->d[i]->uuid_text, ctl_strerror(lift), what);
	}
}

int ctl_chain_of(const Rdmafs__Layout *l, uint64_t ino, uint64_t index, const uint8_t **out)
{
	const uint8_t *uuids[RDMAFS_MAX_STRIPE];
	int chain[RDMAFS_MAX_REPLICAS], n;

	if (!l->n_daemons || l->n_daemons > RDMAFS_MAX_STRIPE)
		return -EPROTO;
	for (size_t i = 0; i < l->n_daemons; i++) {
		if (l->daemons[i].len != RDMAFS_UUID_LEN)
			return -EPROTO;
		uuids[i] = l->daemons[i].data;
	}
	if (rdmafs_domains_check(l->domains, l->n_domains, l->n_daemons))
		return -EPROTO;
	n = rdmafs_place_chain(uuids, l->n_domains ? l->domains : NULL, l->n_daemons,
			       l->placement_seed, ino, index, l->replicas, chain);
	for (int i = 0; i < n; i++)
		out[i] = uuids[chain[i]];
	return n;
}

int ctl_inode_list(struct ctl *c, uint64_t after, Rdmafs__InodeListResp **out)
{
	Rdmafs__InodeListReq req = RDMAFS__INODE_LIST_REQ__INIT;
	Rdmafs__InodeListResp *resp;
	int ret;

	req.start_after = after;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_INODE_LIST, &req.base,
			    &rdmafs__inode_list_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	for (size_t i = 0; i < resp->n_inodes; i++) {
		const Rdmafs__InodeListEntry *e = resp->inodes[i];
		const Rdmafs__Layout *l = e ? e->layout : NULL;
		bool ok = e && e->ino > after;

		if (ok && l) {
			ok = rdmafs_layout_check(l->chunk_size, l->n_daemons, l->stripe_width) ==
				     0 &&
			     rdmafs_domains_check(l->domains, l->n_domains, l->n_daemons) == 0;
			for (size_t d = 0; ok && d < l->n_daemons; d++)
				ok = l->daemons[d].len == RDMAFS_UUID_LEN;
		}
		if (!ok) {
			ctl_err("the metadata service at %s sent a malformed inode list",
				c->meta_uri);
			rdmafs__inode_list_resp__free_unpacked(resp, NULL);
			return -EBADMSG;
		}
		after = e->ino;
	}
	if (resp->n_inodes == 0)
		resp->done = true;
	*out = resp;
	return 0;
}
