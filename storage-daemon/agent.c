/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Cluster membership: registers this daemon (UUID, advertised addresses,
 * capacity) with the metadata service and heartbeats to it, so clients find
 * it in the cluster map and a daemon that stops is marked down. Where the
 * metadata service runs in this daemon the calls go to it directly, and the
 * agent also ticks it once a second.
 *
 * A daemon removed from the cluster (rdmafsctl remove) is refused by the
 * service with -EIDRM: the agent says so once and stops the daemon, which
 * exits with DAEMON_EXIT_REMOVED, rather than heartbeating in vain forever.
 * Where the service runs in this daemon it keeps serving metadata.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "xprt.h"
#include "rdmafs.pb-c.h"
#include "daemon_i.h"
#include "meta.h"

/* A CLIENT_LIST page fills a reply of the connection (16 KiB by default). */
#define AGENT_REPLY_MAX (64u << 10)
#define AGENT_TICK_MS	1000u
/* Until the service tells us its interval (RegisterDaemonResp). */
#define DEFAULT_HEARTBEAT_MS  2000u
#define MAX_BACKOFF_MS	      10000u
#define AGENT_CALL_TIMEOUT_MS 3000
/* The walk that sums what the store holds takes at most 1/SCAN_SHARE of the agent's time. */
#define SCAN_SHARE 20u
#define LABEL_MAX  64 /* a name or disk id, as RegisterDaemonReq allows */
/* Daemons a heartbeat reports missed chunks for, and the records read at a time. */
#define AGENT_MISS_TARGETS 64u
#define AGENT_MISS_PAGE	   256u

struct agent {
	struct agent_params p;
	char **addresses;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stopping;
	bool kicked; /* the daemon's map fell behind: fetch it without waiting for the tick */
	struct xprt_conn *conn;
	bool registered;
	bool reported_unreachable;
	bool removed; /* refused with -EIDRM: no more registering; read by agent_removed() */
	uint32_t heartbeat_ms;
	char name[LABEL_MAX + 1];
	char disk_id[LABEL_MAX + 1];
	char host[LABEL_MAX + 1], rack[LABEL_MAX + 1]; /* "": undeclared */
	uint8_t cluster_id[16]; /* the cluster the data directory joined ... */
	bool cluster_known;	/* ... if it joined one */
	uint64_t stored_bytes;	/* the last walk's sum */
	uint64_t next_scan_ms;	/* when to walk again */
	bool reported_scan_error;
	/* for agent_state(), written with atomics: another thread reads them */
	uint32_t map_state;
	bool registered_shown;
	uint8_t reply[AGENT_REPLY_MAX];
};

static uint64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * What this daemon stores (its chunks' bytes, from a walk of the chunk index
 * repeated at most every SCAN_SHARE times the walk's own duration) and what it
 * may use: that plus the space free to it on its file system.
 */
static void capacity(struct agent *a, uint64_t *total, uint64_t *used)
{
	uint64_t start = monotonic_ms(), took;
	struct statvfs st;
	int ret;

	if (start >= a->next_scan_ms) {
		ret = store_bytes(a->p.store, &a->stored_bytes);
		if (ret && !a->reported_scan_error)
			rdmafs_log(RDMAFS_LOG_WARN, "cannot sum the chunk store's bytes: %s",
				   strerror(-ret));
		a->reported_scan_error = ret != 0;
		took = monotonic_ms() - start;
		a->next_scan_ms = start + took * SCAN_SHARE;
	}
	*used = a->stored_bytes;
	*total = a->stored_bytes;
	if (fstatvfs(store_data_fd(a->p.store), &st) == 0)
		*total += (uint64_t)st.f_bavail * st.f_frsize;
}

/*
 * Daemons on one file system share its free space: "MACHINE-ID:MAJOR:MINOR"
 * of the data directory names it (the host name where there is no
 * machine-id). Empty when even that fails: the disk counts as this daemon's.
 */
static void disk_identity(int data_fd, char *out, size_t len)
{
	char host[LABEL_MAX - 20] = "";
	struct stat st;
	FILE *f;

	out[0] = '\0';
	if (fstat(data_fd, &st))
		return;
	f = fopen("/etc/machine-id", "re");
	if (!f || !fgets(host, sizeof(host), f))
		host[0] = '\0';
	if (f)
		fclose(f);
	host[strcspn(host, "\n")] = '\0';
	if (!host[0] && gethostname(host, sizeof(host) - 1))
		return;
	host[sizeof(host) - 1] = '\0';
	snprintf(out, len, "%s:%u:%u", host, major(st.st_dev), minor(st.st_dev));
}

/* One call to the metadata service: in process when hosted here, else over the wire. */
static int agent_call(struct agent *a, uint32_t method, const ProtobufCMessage *req,
		      size_t *reply_len)
{
	size_t len = protobuf_c_message_get_packed_size(req);
	uint8_t *buf = malloc(len ? len : 1);
	int ret;

	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(req, buf);
	if (a->p.meta) {
		ret = meta_handle(a->p.meta, method, buf, len, a->reply, sizeof(a->reply),
				  reply_len);
		goto out_free;
	}
	if (a->conn && !xprt_conn_alive(a->conn)) {
		xprt_conn_close(a->conn);
		a->conn = NULL;
		a->registered = false;
	}
	if (!a->conn) {
		ret = xprt_connect(a->p.ctx, a->p.metadata_uri, &a->conn);
		if (ret) {
			a->conn = NULL;
			goto out_free;
		}
	}
	ret = xprt_call(a->conn, method, buf, len, a->reply, sizeof(a->reply), reply_len,
			AGENT_CALL_TIMEOUT_MS);
out_free:
	free(buf);
	return ret;
}

static int do_register(struct agent *a)
{
	Rdmafs__RegisterDaemonReq req = RDMAFS__REGISTER_DAEMON_REQ__INIT;
	Rdmafs__RegisterDaemonResp *resp;
	size_t len = 0;
	char text[37];
	int ret;

	req.uuid.data = (uint8_t *)a->p.uuid;
	req.uuid.len = 16;
	req.n_addresses = a->p.address_count;
	req.addresses = a->addresses;
	req.name = a->name;
	req.disk_id = a->disk_id;
	req.host = a->host;
	req.rack = a->rack;
	req.hosts_metadata = a->p.meta != NULL;
	if (a->cluster_known) {
		req.cluster_id.data = a->cluster_id;
		req.cluster_id.len = sizeof(a->cluster_id);
	}
	capacity(a, &req.capacity_bytes, &req.used_bytes);
	ret = agent_call(a, RDMAFS__METHOD__METHOD_REGISTER_DAEMON, &req.base, &len);
	/*
	 * Another cluster's service: never join it, but keep asking (the address
	 * may serve ours again: a service moved or rebuilt). Said once, as an error.
	 */
	if (ret == -EXDEV) {
		datadir_uuid_format(a->cluster_id, text);
		if (!a->reported_unreachable)
			rdmafs_log(
				RDMAFS_LOG_ERR,
				"the metadata service at %s refused this daemon: its data "
				"directory belongs to another cluster (%s); point metadata_uri at "
				"that cluster's metadata service, or give this daemon an empty "
				"data directory to join this one (retrying)",
				a->p.meta ? "(hosted here)" : a->p.metadata_uri, text);
		a->reported_unreachable = true;
		return ret;
	}
	if (ret)
		return ret;
	resp = rdmafs__register_daemon_resp__unpack(NULL, len, a->reply);
	if (!resp)
		return -EBADMSG;
	if (!a->cluster_known && resp->cluster_id.len == sizeof(a->cluster_id)) {
		/* the first cluster we join is ours for good: remember it before serving */
		ret = datadir_cluster_set(a->p.datadir, resp->cluster_id.data);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_ERR, "cannot record the cluster joined: %s",
				   strerror(-ret));
			rdmafs__register_daemon_resp__free_unpacked(resp, NULL);
			return ret;
		}
		memcpy(a->cluster_id, resp->cluster_id.data, sizeof(a->cluster_id));
		a->cluster_known = true;
		datadir_uuid_format(a->cluster_id, text);
		rdmafs_log(RDMAFS_LOG_INFO, "joined cluster %s", text);
	}
	if (resp->heartbeat_interval_ms >= 100 && resp->heartbeat_interval_ms <= 60000)
		a->heartbeat_ms = resp->heartbeat_interval_ms;
	__atomic_store_n(&a->map_state, (uint32_t)resp->state, __ATOMIC_RELAXED);
	rdmafs_log(RDMAFS_LOG_INFO, "registered with the metadata service%s%s (epoch %llu)",
		   a->p.meta ? "" : " at ", a->p.meta ? " hosted here" : a->p.metadata_uri,
		   (unsigned long long)resp->epoch);
	rdmafs__register_daemon_resp__free_unpacked(resp, NULL);
	a->registered = true;
	return 0;
}

/*
 * Fetches the revoked client keys (every page of CLIENT_LIST) into the
 * keyring, as of @epoch, the keys_epoch the last heartbeat showed.
 */
static int fetch_revoked(struct agent *a, uint64_t epoch)
{
	Rdmafs__ClientListReq req = RDMAFS__CLIENT_LIST_REQ__INIT;
	uint64_t *serials = NULL, *grown;
	size_t count = 0, cap = 0, len = 0;
	bool done = false;
	int ret = 0;

	while (!done) {
		Rdmafs__ClientListResp *resp;

		ret = agent_call(a, RDMAFS__METHOD__METHOD_CLIENT_LIST, &req.base, &len);
		if (ret)
			goto out_free;
		resp = rdmafs__client_list_resp__unpack(NULL, len, a->reply);
		if (!resp) {
			ret = -EBADMSG;
			goto out_free;
		}
		for (size_t i = 0; i < resp->n_clients; i++) {
			const Rdmafs__ClientInfo *ci = resp->clients[i];

			/* serials rise page by page: anything else would never end */
			if (ci->serial <= req.start_after) {
				ret = -EBADMSG;
				break;
			}
			req.start_after = ci->serial;
			if (!ci->revoked)
				continue;
			if (count == cap) {
				cap = cap ? cap * 2 : 64;
				grown = realloc(serials, cap * sizeof(*serials));
				if (!grown) {
					ret = -ENOMEM;
					break;
				}
				serials = grown;
			}
			serials[count++] = ci->serial;
		}
		done = resp->done || resp->n_clients == 0;
		rdmafs__client_list_resp__free_unpacked(resp, NULL);
		if (ret)
			goto out_free;
	}
	ret = keyring_set(a->p.keyring, serials, count, epoch);
	if (!ret)
		rdmafs_log(RDMAFS_LOG_INFO, "client keys: %zu revoked (keys epoch %llu)", count,
			   (unsigned long long)epoch);
out_free:
	free(serials);
	return ret;
}

/*
 * Takes the cluster map into the daemon's copy (dmap.c) when the service's
 * epoch @epoch differs from it, and tells the server (its resync).
 */
static int fetch_map(struct agent *a, uint64_t epoch)
{
	Rdmafs__GetClusterMapReq req = RDMAFS__GET_CLUSTER_MAP_REQ__INIT;
	Rdmafs__GetClusterMapResp *resp;
	size_t len = 0;
	int ret;

	if (!a->p.dmap || (epoch == dmap_epoch(a->p.dmap) && !dmap_behind(a->p.dmap)))
		return 0;
	req.include_removed = true; /* a chain skips a REMOVED daemon; it is no stranger */
	ret = agent_call(a, RDMAFS__METHOD__METHOD_GET_CLUSTER_MAP, &req.base, &len);
	if (ret)
		return ret;
	resp = rdmafs__get_cluster_map_resp__unpack(NULL, len, a->reply);
	if (!resp)
		return -EBADMSG;
	ret = dmap_set(a->p.dmap, resp);
	rdmafs__get_cluster_map_resp__free_unpacked(resp, NULL);
	if (!ret && a->p.map_changed)
		a->p.map_changed(a->p.map_arg);
	return ret;
}

/* A daemon's count in a heartbeat's misses. */
struct miss_tally {
	Rdmafs__MissCount counts[AGENT_MISS_TARGETS];
	Rdmafs__MissCount *list[AGENT_MISS_TARGETS];
	uint8_t uuids[AGENT_MISS_TARGETS][RDMAFS_UUID_LEN];
	size_t n;
};

/*
 * Counts, per daemon, the chunks it missed that this daemon is to copy to it
 * (it is the head of their chain in our map), into @req's misses.
 */
static void tally_misses(struct agent *a, struct miss_tally *t, Rdmafs__HeartbeatReq *req)
{
	struct missed_rec page[AGENT_MISS_PAGE], after;
	size_t count;
	bool more = true, have_after = false;

	t->n = 0;
	while (more && !missed_list(a->p.missed, have_after ? &after : NULL, page, AGENT_MISS_PAGE,
				    &count)) {
		for (size_t i = 0; i < count; i++) {
			const struct missed_rec *r = &page[i];
			ProtobufCBinaryData members[MISSED_MEMBERS_MAX];
			size_t k;
			int h;

			for (unsigned j = 0; j < r->n_members; j++)
				members[j] = (ProtobufCBinaryData){RDMAFS_UUID_LEN,
								   (uint8_t *)r->members[j]};
			h = dmap_head(a->p.dmap, members, r->n_members);
			if (h < 0 || memcmp(r->members[h], a->p.uuid, RDMAFS_UUID_LEN) != 0)
				continue;
			for (k = 0; k < t->n; k++)
				if (memcmp(t->uuids[k], r->target, RDMAFS_UUID_LEN) == 0)
					break;
			if (k == t->n) {
				if (t->n == AGENT_MISS_TARGETS)
					continue;
				rdmafs__miss_count__init(&t->counts[k]);
				memcpy(t->uuids[k], r->target, RDMAFS_UUID_LEN);
				t->counts[k].uuid.data = t->uuids[k];
				t->counts[k].uuid.len = RDMAFS_UUID_LEN;
				t->list[k] = &t->counts[k];
				t->n++;
			}
			t->counts[k].chunks++;
		}
		more = count == AGENT_MISS_PAGE;
		if (count) {
			after = page[count - 1];
			have_after = true;
		}
	}
	req->misses = t->list;
	req->n_misses = t->n;
}

static int do_heartbeat(struct agent *a)
{
	Rdmafs__HeartbeatReq req = RDMAFS__HEARTBEAT_REQ__INIT;
	Rdmafs__HeartbeatResp *resp;
	struct miss_tally *tally = NULL;
	uint64_t sent_ms = dmap_now_ms();
	size_t len = 0;
	int ret;

	req.uuid.data = (uint8_t *)a->p.uuid;
	req.uuid.len = 16;
	capacity(a, &req.capacity_bytes, &req.used_bytes);
	if (a->p.dmap && a->p.missed) {
		/* the epoch first: a miss recorded after it is counted (dmap_report_epoch()) */
		req.known_epoch = dmap_report_epoch(a->p.dmap);
		tally = malloc(sizeof(*tally));
		if (tally)
			tally_misses(a, tally, &req);
	}
	ret = agent_call(a, RDMAFS__METHOD__METHOD_HEARTBEAT, &req.base, &len);
	free(tally);
	/* A service that lost us (a new store, or a restart that forgot us): register again. */
	if (ret == -ENOENT)
		a->registered = false;
	if (ret)
		return ret;
	/* the state only feeds /metrics: a reply without one is no failure */
	resp = rdmafs__heartbeat_resp__unpack(NULL, len, a->reply);
	if (resp) {
		uint64_t keys_epoch = resp->keys_epoch, epoch = resp->epoch;
		uint32_t lease_ms = resp->lease_ms;

		__atomic_store_n(&a->map_state, (uint32_t)resp->state, __ATOMIC_RELAXED);
		rdmafs__heartbeat_resp__free_unpacked(resp, NULL);
		/* the lease needs the map the service has: a write routed by an older one skips
		 * wrongly */
		if (a->p.dmap) {
			ret = fetch_map(a, epoch);
			if (ret)
				rdmafs_log(RDMAFS_LOG_WARN, "cannot fetch the cluster map: %s",
					   xprt_strerror(ret));
			else if (lease_ms && dmap_epoch(a->p.dmap) >= epoch)
				dmap_lease(a->p.dmap, sent_ms, lease_ms);
		}
		/* a failed fetch is tried again at the next heartbeat: the epoch still differs */
		if (a->p.keyring && keys_epoch != keyring_epoch(a->p.keyring)) {
			ret = fetch_revoked(a, keys_epoch);
			if (ret)
				rdmafs_log(RDMAFS_LOG_WARN,
					   "cannot fetch the revoked client keys: %s",
					   xprt_strerror(ret));
		}
	}
	return 0;
}

/* The metadata service refused us with -EIDRM (see the top of this file). */
static void refused_as_removed(struct agent *a)
{
	const uint8_t *u = a->p.uuid;
	char uuid[37];

	snprintf(uuid, sizeof(uuid),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
		 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
		 u[15]);
	__atomic_store_n(&a->removed, true, __ATOMIC_RELEASE);
	if (a->p.meta) {
		rdmafs_log(RDMAFS_LOG_WARN,
			   "this daemon (uuid %s) was removed from the cluster as a storage daemon "
			   "(rdmafsctl remove): it stores no new chunks but keeps serving the "
			   "metadata service",
			   uuid);
		return;
	}
	rdmafs_log(RDMAFS_LOG_ERR,
		   "this daemon (uuid %s) was removed from the cluster (rdmafsctl remove) and the "
		   "metadata service at %s refuses it: stopping. No file uses its chunks any "
		   "more; to join the cluster again as a new daemon, empty its data directory "
		   "(or give it a new one) and start it",
		   uuid, a->p.metadata_uri);
	/* main() waits for the signal; agent_removed() gives it the exit status */
	kill(getpid(), SIGTERM);
}

bool agent_removed(const struct agent *a)
{
	return a && __atomic_load_n(&a->removed, __ATOMIC_ACQUIRE);
}

static void *agent_main(void *arg)
{
	struct agent *a = arg;
	uint64_t next_beat = 0, backoff = AGENT_TICK_MS;

	pthread_mutex_lock(&a->lock);
	while (!a->stopping) {
		uint64_t now = monotonic_ms();
		struct timespec until;
		int ret = 0;

		pthread_mutex_unlock(&a->lock);
		if (a->p.meta)
			meta_tick(a->p.meta, now / 1000u);
		/* a request met a daemon our map does not have: fetch it between heartbeats */
		if (a->registered && a->p.dmap && dmap_behind(a->p.dmap))
			fetch_map(a, dmap_epoch(a->p.dmap));
		if (now >= next_beat && !a->removed) {
			bool was_registered = a->registered;

			ret = was_registered ? do_heartbeat(a) : do_register(a);
			/* The service forgot us (a new or restored store): register at once. */
			if (ret && was_registered && !a->registered)
				ret = do_register(a);
			/* registered: a heartbeat at once brings the map and the lease */
			if (!ret && !was_registered && a->p.dmap)
				ret = do_heartbeat(a);
			if (ret == -EIDRM) {
				refused_as_removed(a);
			} else if (ret) {
				if (!a->reported_unreachable)
					rdmafs_log(RDMAFS_LOG_WARN,
						   "cannot reach the metadata service at %s: %s "
						   "(retrying)",
						   a->p.metadata_uri ? a->p.metadata_uri
								     : "(local)",
						   xprt_strerror(ret));
				a->reported_unreachable = true;
				backoff =
					backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
				next_beat = now + backoff;
			} else {
				if (a->reported_unreachable)
					rdmafs_log(RDMAFS_LOG_INFO,
						   "metadata service reachable again");
				a->reported_unreachable = false;
				backoff = AGENT_TICK_MS;
				next_beat = now + a->heartbeat_ms;
			}
			__atomic_store_n(&a->registered_shown, a->registered, __ATOMIC_RELAXED);
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)AGENT_TICK_MS * 1000000L;
		while (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&a->lock);
		if (!a->stopping && !a->kicked)
			pthread_cond_timedwait(&a->cond, &a->lock, &until);
		a->kicked = false;
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* The daemon's map fell behind a request (dmap_on_behind()): wake the agent. */
static void agent_kick(void *arg)
{
	struct agent *a = arg;

	pthread_mutex_lock(&a->lock);
	a->kicked = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

int agent_start(const struct agent_params *p, struct agent **out)
{
	struct agent *a = calloc(1, sizeof(*a));
	int ret;

	if (!a)
		return -ENOMEM;
	a->p = *p;
	a->heartbeat_ms = DEFAULT_HEARTBEAT_MS;
	snprintf(a->name, sizeof(a->name), "%s", p->name ? p->name : "");
	snprintf(a->host, sizeof(a->host), "%s", p->host ? p->host : "");
	snprintf(a->rack, sizeof(a->rack), "%s", p->rack ? p->rack : "");
	disk_identity(store_data_fd(p->store), a->disk_id, sizeof(a->disk_id));
	ret = datadir_cluster_get(p->datadir, a->cluster_id, &a->cluster_known);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot read the cluster id of the data directory: %s",
			   ret == -EINVAL ? "cluster-id is damaged" : strerror(-ret));
		free(a);
		return ret;
	}
	/* protobuf-c wants char **; the strings are the caller's and outlive us. */
	a->addresses = calloc(p->address_count ? p->address_count : 1, sizeof(char *));
	if (!a->addresses) {
		ret = -ENOMEM;
		goto err_free;
	}
	for (unsigned i = 0; i < p->address_count; i++)
		a->addresses[i] = (char *)p->addresses[i];
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	if (p->dmap)
		dmap_on_behind(p->dmap, agent_kick, a);
	ret = -pthread_create(&a->thread, NULL, agent_main, a);
	if (ret)
		goto err_cond;
	*out = a;
	return 0;

err_cond:
	if (p->dmap)
		dmap_on_behind(p->dmap, NULL, NULL);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->addresses);
err_free:
	free(a);
	return ret;
}

void agent_state(struct agent *a, uint32_t *state, bool *registered)
{
	*state = __atomic_load_n(&a->map_state, __ATOMIC_RELAXED);
	*registered = __atomic_load_n(&a->registered_shown, __ATOMIC_RELAXED);
}

void agent_stop(struct agent *a)
{
	if (!a)
		return;
	if (a->p.dmap)
		dmap_on_behind(a->p.dmap, NULL, NULL);
	pthread_mutex_lock(&a->lock);
	a->stopping = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	xprt_conn_close(a->conn);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->addresses);
	free(a);
}
