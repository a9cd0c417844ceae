/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-daemon: the storage daemon.
 *
 *   rdmafs-daemon --config /etc/rdmafs/daemon.conf
 *   rdmafs-daemon --data-dir /srv/rdmafs --listen tcp://0.0.0.0:7471 \
 *                 --secret-file /etc/rdmafs/secret
 *
 * It never forks: run it under systemd (Type=notify; READY=1 is sent once
 * every listener is up) or in the foreground. SIGTERM or SIGINT stop
 * accepting, finish the requests already queued, sync and exit 0.
 * Exit status: 0 clean stop, 1 refused to start (the log says why).
 *
 *   rdmafs-daemon --check-config /etc/rdmafs/daemon.conf
 *
 * checks the configuration, the secret file and the data directory, starts
 * nothing and changes nothing: "FILE: OK" and 0, or every error and 1.
 *
 * With metrics_listen (--metrics-listen HOST:PORT) it serves Prometheus
 * metrics at http://HOST:PORT/metrics once it serves requests (metrics.c).
 *
 * Start order: everything that can be checked without side effects (the
 * configuration, then whether each listen address and the metrics address
 * can be bound, then the secret) comes before the data directory is created, so a daemon refused
 * for a bad address leaves no new directory behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "xprt.h"
#include "daemon_i.h"
#include "meta.h"

#define URI_MAX 300
/* The metadata service's store, inside the data directory. */
#define META_SUBDIR "fsmeta"

__attribute__((format(printf, 3, 0))) static void
meta_log_bridge(void *arg, enum meta_log_level level, const char *fmt, va_list ap)
{
	rdmafs_vlog((enum rdmafs_log_level)level, fmt, ap);
}

/* Opens the metadata service's store in DATA_DIR/fsmeta (created on first start). */
static int open_metadata(const struct daemon_config *cfg, const struct datadir *dd,
			 struct meta **out)
{
	struct meta_options mo = {.log = meta_log_bridge,
				  .reclaim_grace_sec = cfg->reclaim_grace_sec,
				  .replicas = cfg->replicas,
				  .sync_always = cfg->metadata_sync_always,
				  .sync_interval_ms = cfg->metadata_sync_ms};
	char path[4096];
	int ret;

	if (mkdirat(dd->dir_fd, META_SUBDIR, 0700) && errno != EEXIST) {
		ret = -errno;
		rdmafs_log(RDMAFS_LOG_ERR, "cannot create %s/%s: %s", cfg->data_dir, META_SUBDIR,
			   strerror(errno));
		return ret;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", cfg->data_dir, META_SUBDIR) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	ret = meta_open(path, &mo, out);
	if (ret)
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open the metadata store %s: %s", path,
			   strerror(-ret));
	return ret;
}

/*
 * The addresses this daemon is known by in the cluster map: the configured
 * ones, else each listener's URI with its bound port. A wildcard host is
 * replaced by this host's name, with a warning that advertise should be set.
 */
static int build_advertise(const struct daemon_config *cfg, struct xprt_listener **listeners,
			   char (*out)[URI_MAX], unsigned *count)
{
	enum xprt_kind kind;
	char host[256];
	uint16_t port;

	*count = 0;
	if (cfg->advertise_count) {
		for (unsigned i = 0; i < cfg->advertise_count; i++)
			snprintf(out[(*count)++], URI_MAX, "%s", cfg->advertise[i]);
		return 0;
	}
	for (unsigned i = 0; i < cfg->listen_count; i++) {
		if (xprt_uri_parse(cfg->listen[i], &kind, host, sizeof(host), &port))
			return -EINVAL;
		if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
		    strcmp(host, "*") == 0) {
			rdmafs_log(RDMAFS_LOG_WARN,
				   "listening on the wildcard %s: advertising this "
				   "host's name; set advertise if clients cannot resolve it",
				   cfg->listen[i]);
			if (gethostname(host, sizeof(host)))
				return -errno;
			host[sizeof(host) - 1] = '\0';
		}
		kind = xprt_listener_kind(listeners[i]);
		snprintf(out[(*count)++], URI_MAX,
			 strchr(host, ':') ? "%s://[%s]:%u" : "%s://%s:%u", xprt_kind_name(kind),
			 host, xprt_listener_port(listeners[i]));
	}
	return 0;
}

static void notify(const char *state)
{
#ifdef HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

/* Reads the cluster secret into malloc()ed *@out; says why when it cannot. */
static int read_secret(const char *path, uint8_t **out, size_t *len)
{
	int ret = rdmafs_read_secret(path, out, len);
	char why[1024];

	if (ret)
		rdmafs_log(RDMAFS_LOG_ERR, "%s",
			   rdmafs_secret_strerror(path, ret, why, sizeof(why)));
	return ret;
}

/*
 * --check-config: what would stop the daemon, found without starting it.
 * @config_ret is config_load()'s verdict; the checks that need only part of
 * the configuration run anyway, so one run reports every error. Binds no
 * port: an address in use is found at start, before the data directory.
 */
static int check_config(const struct daemon_config *cfg, int config_ret)
{
	uint8_t *secret = NULL;
	size_t secret_len;
	bool ok = config_ret == 0;

	if (config_check_listen(cfg, false))
		ok = false;
	if (cfg->secret_file) {
		if (read_secret(cfg->secret_file, &secret, &secret_len))
			ok = false;
		free(secret);
	}
	if (cfg->data_dir && datadir_check(cfg->data_dir))
		ok = false;
	if (!ok)
		return 1;
	printf("%s: OK\n", cfg->config_file ? cfg->config_file : "command line");
	return 0;
}

/* Writes @port to @path atomically (tmp + rename), for scripts and tests. */
static int write_port_file(const char *path, unsigned port)
{
	char tmp[4096], text[16];
	int fd, len;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	len = snprintf(text, sizeof(text), "%u\n", port);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)len) != len) {
		close(fd);
		unlink(tmp);
		return -EIO;
	}
	close(fd);
	if (rename(tmp, path)) {
		unlink(tmp);
		return -errno;
	}
	return 0;
}

/* A daemon without `name =` is HOST:PORT (its first listener's port). */
static const char *default_name(unsigned port, char *out, size_t len)
{
	char host[DAEMON_NAME_MAX - 6] = "localhost";

	if (gethostname(host, sizeof(host) - 1) == 0)
		host[sizeof(host) - 1] = '\0';
	host[strcspn(host, ".")] = '\0';
	snprintf(out, len, "%s:%u", host, port);
	return out;
}

/*
 * Takes every descriptor the hard limit allows: the chunk store keeps a
 * quarter of them open as its cache of chunk files (store.c), and a soft
 * limit of 1024 (a login shell's) would leave it 256.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		rdmafs_log(RDMAFS_LOG_WARN, "cannot raise the open files limit: %s",
			   strerror(errno));
}

/* The daemon's connects to peers and to the metadata service (xprt_options). */
#define DAEMON_CONNECT_TIMEOUT_MS 2000u

int main(int argc, char **argv)
{
	struct xprt_listener *listeners[DAEMON_MAX_LISTEN] = {NULL};
	char advertise[DAEMON_MAX_LISTEN][URI_MAX];
	const char *advertise_ptrs[DAEMON_MAX_LISTEN];
	struct agent_params ap = {0};
	char name[DAEMON_NAME_MAX + 1];
	struct agent *agent = NULL;
	struct metrics_params mp = {0};
	struct metrics *metrics = NULL;
	struct meta *meta = NULL;
	struct server_params sp = {0};
	struct daemon_config cfg;
	struct xprt_options opts;
	struct xprt_ctx *ctx;
	struct server *srv = NULL;
	struct keyring *keyring = NULL;
	struct missed *missed = NULL;
	struct dmap *dmap = NULL;
	struct store *store;
	struct datadir dd;
	uint8_t *secret = NULL;
	size_t secret_len = 0;
	sigset_t sigs;
	int ret, sig, status = 1;

	rdmafs_log_init("rdmafs-daemon", RDMAFS_LOG_INFO);
	ret = config_load(&cfg, argc, argv);
	if (ret > 0 || cfg.check_only) {
		status = ret > 0 ? 0 : check_config(&cfg, ret);
		config_free(&cfg);
		return status;
	}
	if (ret)
		goto out_free_config;
	rdmafs_log_set_level(cfg.log_level);
	rdmafs_log_hook_xprt();
	if (config_check_listen(&cfg, true))
		goto out_free_config;
	if (read_secret(cfg.secret_file, &secret, &secret_len))
		goto out_free_config;

	/* Every thread inherits this mask; only sigwait() below takes the signals. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	if (datadir_open(cfg.data_dir, &dd))
		goto out_free_config;
	ret = store_open(dd.dir_fd, cfg.max_chunk_size, cfg.lmdb_map_size, &store);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot open the chunk store in %s: %s", cfg.data_dir,
			   strerror(-ret));
		goto out_close_datadir;
	}

	if (cfg.metadata && open_metadata(&cfg, &dd, &meta))
		goto out_close_store;
	/* replicated chunks: the map a write is routed by, and the writes others missed */
	ret = dmap_create(dd.uuid, &dmap);
	if (!ret)
		ret = missed_open(dd.dir_fd, &missed);
	if (ret)
		goto out_close_meta;

	ret = keyring_create(meta, &keyring);
	if (ret)
		goto out_close_meta;
	xprt_options_init(&opts);
	opts.secret = secret;
	opts.secret_len = secret_len;
	opts.identity_check = keyring_check;
	opts.identity_arg = keyring;
	opts.name = cfg.name ? cfg.name : "rdmafs-daemon";
	/*
	 * A peer or metadata service that does not answer a connect (its link
	 * cut) is given up before a client's call to us times out (5 s).
	 */
	opts.connect_timeout_ms = DAEMON_CONNECT_TIMEOUT_MS;
	if (cfg.busy_poll_us >= 0)
		opts.busy_poll_us = (uint32_t)cfg.busy_poll_us;
	ret = xprt_ctx_create(&opts, &ctx);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot start the transport: %s", xprt_strerror(ret));
		goto out_close_meta;
	}
	sp.ctx = ctx;
	sp.meta = meta;
	sp.store = store;
	sp.keyring = keyring;
	sp.uuid = dd.uuid;
	sp.workers = cfg.workers;
	sp.meta_workers = cfg.meta_workers;
	sp.queue_depth = cfg.queue_depth;
	sp.max_chunk_size = cfg.max_chunk_size;
	sp.data_sync_ms = cfg.data_sync_always ? 0 : cfg.data_sync_ms;
	sp.dmap = dmap;
	sp.missed = missed;
	ret = server_create(&sp, &srv);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot start the workers: %s", strerror(-ret));
		goto out_destroy_ctx;
	}
	for (unsigned i = 0; i < cfg.listen_count; i++) {
		ret = xprt_listen_batched(ctx, cfg.listen[i], server_request_cb, server_batch_end,
					  srv, &listeners[i]);
		if (ret) {
			rdmafs_log(RDMAFS_LOG_ERR, "cannot listen on %s: %s", cfg.listen[i],
				   xprt_strerror(ret));
			goto out_close_listeners;
		}
		rdmafs_log(RDMAFS_LOG_INFO, "listening on %s (port %u, %s)", cfg.listen[i],
			   xprt_listener_port(listeners[i]),
			   xprt_kind_name(xprt_listener_kind(listeners[i])));
	}
	if (cfg.port_file) {
		ret = write_port_file(cfg.port_file, xprt_listener_port(listeners[0]));
		if (ret) {
			rdmafs_log(RDMAFS_LOG_ERR, "cannot write port file %s: %s", cfg.port_file,
				   strerror(-ret));
			goto out_close_listeners;
		}
	}
	ret = build_advertise(&cfg, listeners, advertise, &ap.address_count);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot work out the addresses to advertise: %s",
			   strerror(-ret));
		goto out_close_listeners;
	}
	for (unsigned i = 0; i < ap.address_count; i++)
		advertise_ptrs[i] = advertise[i];
	ap.ctx = ctx;
	ap.meta = meta;
	ap.metadata_uri = cfg.metadata_uri;
	ap.uuid = dd.uuid;
	ap.addresses = advertise_ptrs;
	ap.store = store;
	ap.datadir = &dd;
	ap.keyring = keyring;
	ap.dmap = dmap;
	ap.missed = missed;
	ap.map_changed = server_map_changed;
	ap.map_arg = srv;
	ap.host = cfg.host;
	ap.rack = cfg.rack;
	ap.name = cfg.name ? cfg.name
			   : default_name(xprt_listener_port(listeners[0]), name, sizeof(name));
	ret = agent_start(&ap, &agent);
	if (ret) {
		rdmafs_log(RDMAFS_LOG_ERR, "cannot start cluster membership: %s", strerror(-ret));
		goto out_close_listeners;
	}
	if (cfg.metrics_listen && *cfg.metrics_listen) {
		mp.listen = cfg.metrics_listen;
		mp.port_file = cfg.metrics_port_file;
		mp.server = srv;
		mp.meta = meta;
		mp.agent = agent;
		mp.name = cfg.name ? cfg.name : "rdmafs-daemon";
		mp.uuid_text = dd.uuid_text;
		if (metrics_start(&mp, &metrics))
			goto out_stop_agent;
	}
	notify("READY=1");
	rdmafs_log(RDMAFS_LOG_INFO, "serving data directory %s (uuid %s, %u workers%s)",
		   cfg.data_dir, dd.uuid_text, cfg.workers, meta ? ", metadata service" : "");

	for (;;) {
		if (sigwait(&sigs, &sig))
			continue;
		if (sig == SIGTERM || sig == SIGINT)
			break;
	}
	notify("STOPPING=1");
	rdmafs_log(RDMAFS_LOG_INFO, "stopping: draining requests in flight");
	/* removed from the cluster: a status that tells systemd not to restart us */
	status = agent_removed(agent) && !meta ? DAEMON_EXIT_REMOVED : 0;

	metrics_stop(metrics);
out_stop_agent:
	agent_stop(agent);
out_close_listeners:
	for (unsigned i = 0; i < cfg.listen_count; i++)
		xprt_listener_close(listeners[i]);
	server_stop(srv);
out_destroy_ctx:
	xprt_ctx_destroy(ctx);
	server_destroy(srv);
out_close_meta:
	keyring_destroy(keyring);
	missed_close(missed);
	dmap_destroy(dmap);
	meta_close(meta);
out_close_store:
	store_close(store);
out_close_datadir:
	datadir_close(&dd);
out_free_config:
	free(secret);
	config_free(&cfg);
	if (status == 0 || status == DAEMON_EXIT_REMOVED)
		rdmafs_log(RDMAFS_LOG_INFO, "stopped");
	return status;
}
