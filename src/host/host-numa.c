/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-numa.c - places the host's buffer and staging memory on the NUMA node of
 * the NIC that reaches the memory nodes (libnuma); harmless on machines
 * with one node or none.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <numa.h>

#include "host/host.h"

/* Returns the NUMA node of network interface ifname, or -1. */
static int
numa_of_netdev(const char *ifname)
{
	char path[128];
	FILE *f;
	int node = -1;

	snprintf(path, sizeof path, "/sys/class/net/%s/device/numa_node",
	    ifname);
	f = fopen(path, "re");
	if (f == NULL)
		return -1;
	if (fscanf(f, "%d", &node) != 1)
		node = -1;
	fclose(f);
	return node;
}

/*
 * Returns the interface the kernel routes to "host:port" through (by the
 * source address of a connected UDP socket), in ifname.
 */
static int
route_ifname(const char *addr, char *ifname, size_t len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *ai = NULL;
	struct sockaddr_storage local;
	socklen_t llen = sizeof local;
	struct ifaddrs *ifa = NULL;
	char host[256], *colon;
	int fd = -1, rc = -1;

	snprintf(host, sizeof host, "%s", addr);
	colon = strrchr(host, ':');
	if (colon == NULL)
		return -1;
	*colon = '\0';
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		return -1;
	fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    getsockname(fd, (struct sockaddr *)&local, &llen) < 0 ||
	    getifaddrs(&ifa) < 0)
		goto out;
	for (struct ifaddrs *i = ifa; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL ||
		    i->ifa_addr->sa_family != local.ss_family)
			continue;
		if ((local.ss_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
		    ((struct sockaddr_in *)&local)->sin_addr.s_addr) ||
		    (local.ss_family == AF_INET6 &&
		    memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
		    &((struct sockaddr_in6 *)&local)->sin6_addr, 16) == 0)) {
			snprintf(ifname, len, "%s", i->ifa_name);
			rc = 0;
			break;
		}
	}
out:
	if (ifa != NULL)
		freeifaddrs(ifa);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

/*
 * Chooses the NUMA node for the buffer: numa_node from the configuration,
 * or, for auto, the node of the NIC routing to the first memory node.
 * Returns -1 for "no placement".
 */
int
host_numa_pick(struct host *h, const char *addr)
{
	int want = (int)cfg_int(h->d->cfg, CFG_HOST_NUMA_NODE);
	char ifname[IF_NAMESIZE + 1] = "";

	if (numa_available() < 0) {
		log_info("numa: not available; buffers are not placed");
		return -1;
	}
	if (want >= 0) {
		if (want > numa_max_node()) {
			log_warn("numa: node %d does not exist (max %d); buffers "
			    "are not placed", want, numa_max_node());
			return -1;
		}
		log_info("numa: buffers on node %d (configured)", want);
		return want;
	}
	if (route_ifname(addr, ifname, sizeof ifname) < 0) {
		log_info("numa: no route to %s yet; buffers are not placed",
		    addr);
		return -1;
	}
	want = numa_of_netdev(ifname);
	if (want < 0 || numa_max_node() == 0) {
		log_info("numa: %s has no NUMA node (%d node%s here); buffers "
		    "are not placed", ifname, numa_max_node() + 1,
		    numa_max_node() == 0 ? "" : "s");
		return -1;
	}
	log_info("numa: buffers on node %d, near %s", want, ifname);
	return want;
}

/* Sets the memory policy of a mapping to the chosen node. */
void
host_numa_bind(struct host *h, void *mem, size_t len)
{
	if (h->numa_node >= 0)
		numa_tonode_memory(mem, len, h->numa_node);
}

/*
 * Allocates page-aligned memory on the chosen node (or anywhere), populated
 * now: the data path takes no page fault on it, and famd's size is what it
 * will stay.
 */
void *
host_numa_alloc(struct host *h, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	host_numa_bind(h, p, len);
#ifdef MADV_POPULATE_WRITE
	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return p;
#endif
	memset(p, 0, len); /* a kernel before 5.14 */
	return p;
}

/* Frees memory from host_numa_alloc(). */
void
host_numa_free(void *mem, size_t len)
{
	munmap(mem, len);
}
