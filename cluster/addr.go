package cluster

import (
	"fmt"
	"net"
	"strconv"
)

// AnnounceAddr is the address this server gives clients of the Redis
// Cluster and Sentinel faces, and registers (server.announce_addr):
// announce when set, else the address the listener is bound to (bound),
// its unspecified host (0.0.0.0, ::) replaced by the machine's first
// non-loopback address among addrs (net.InterfaceAddrs), IPv4 first.
// from says where it came from, for the log. A machine with no other
// address than loopback announces 127.0.0.1.
func AnnounceAddr(announce string, bound net.Addr, addrs func() ([]net.Addr, error)) (addr, from string, err error) {
	if announce != "" {
		host, port, err := net.SplitHostPort(announce)
		if err != nil {
			return "", "", fmt.Errorf("server.announce_addr %q: %w", announce, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			return "", "", fmt.Errorf("server.announce_addr %q: an unspecified host cannot be dialled", announce)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return "", "", fmt.Errorf("server.announce_addr %q: the port must be from 1 to 65535", announce)
		}
		return announce, "server.announce_addr", nil
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return "", "", fmt.Errorf("the listener's address %v is not TCP: set server.announce_addr", bound)
	}
	if !tcp.IP.IsUnspecified() {
		return tcp.String(), "server.addr", nil
	}
	port := strconv.Itoa(tcp.Port)
	list, err := addrs()
	if err != nil {
		return "", "", fmt.Errorf("server.addr %s listens on every interface, and the machine's addresses could not be read "+
			"(set server.announce_addr): %w", tcp, err)
	}
	if ip := firstAddress(list); ip != nil {
		return net.JoinHostPort(ip.String(), port), "server.addr on every interface: the machine's first address", nil
	}
	return net.JoinHostPort("127.0.0.1", port), "server.addr on every interface, and the machine has no address but loopback", nil
}

// firstAddress is the first global unicast IPv4 address of list, else
// the first IPv6 one; nil when there is none.
func firstAddress(list []net.Addr) net.IP {
	var v6 net.IP
	for _, a := range list {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if ip == nil || !ip.IsGlobalUnicast() {
			continue // loopback, link-local, multicast, unspecified
		}
		if ip4 := ip.To4(); ip4 != nil {
			return ip4
		}
		if v6 == nil {
			v6 = ip
		}
	}
	return v6
}
