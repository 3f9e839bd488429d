package server

import "log/slog"

// FitFileLimit makes room for maxClients connections in the process's
// open-file limit: each connection holds a descriptor, and reserved more
// are kept for everything else (listeners, database connections, event
// loops, log files). When the soft limit is too low it is raised, up to
// the hard limit; when even the hard limit is too low, the clients that
// fit are returned and a warning logged, as Redis lowers maxclients to its
// ulimit, so that connections beyond them get "max number of clients
// reached" rather than a failing accept. (Go itself raises the soft limit
// to the hard one at start on Linux, so the raise is mostly a check.) On
// systems without rlimits it returns maxClients.
func FitFileLimit(maxClients, reserved int, log *slog.Logger) int {
	cur, hard, ok := getFileLimit(log)
	if !ok {
		return maxClients
	}
	soft, clients := fitClients(maxClients, reserved, cur, hard)
	if soft > cur {
		if err := setFileLimit(soft, hard); err != nil {
			log.Warn("cannot raise the open-file limit", "from", cur, "to", soft, "err", err)
			soft, clients = fitClients(maxClients, reserved, cur, cur)
		} else {
			log.Info("raised the open-file limit for server.max_clients", "from", cur, "to", soft, "max_clients", maxClients)
		}
	}
	if clients < maxClients {
		log.Warn("server.max_clients lowered to fit the open-file limit; raise the hard limit (ulimit -n) to allow more",
			"max_clients", maxClients, "lowered_to", clients, "open_file_limit", soft, "reserved", reserved)
	} else {
		log.Debug("open-file limit", "soft", soft, "hard", hard, "max_clients", maxClients, "reserved", reserved)
	}
	return clients
}

// fitClients is the soft limit to set (cur, or more up to hard) and the
// clients that fit in it with reserved descriptors kept: maxClients, or
// fewer but at least one.
func fitClients(maxClients, reserved int, cur, hard uint64) (soft uint64, clients int) {
	need := uint64(maxClients) + uint64(reserved)
	soft = cur
	if need > cur {
		soft = max(cur, min(need, hard))
	}
	if need <= soft {
		return soft, maxClients
	}
	if soft <= uint64(reserved) {
		return soft, 1
	}
	return soft, int(soft - uint64(reserved))
}
