// Whether the client of a non-streamed request is still there. cpp-httplib
// 0.11 (Debian's) gives a handler no view of its connection, so the socket
// is found by its addresses among this process's descriptors.
#pragma once

#include <string>

namespace hymba::serve {

// The descriptor of this process's TCP socket whose local port is local_port
// and whose peer is remote_addr:remote_port (the request's connection, open
// while its handler runs); -1 when none is found.
int find_client_socket(const std::string& remote_addr, int remote_port, int local_port);

// Whether the peer of a connected socket has closed it (FIN or reset), without
// reading anything from it.
bool peer_has_closed(int fd);

}  // namespace hymba::serve
