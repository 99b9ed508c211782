#include "serve/client_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace hymba::serve {

namespace {

// addr's text (as cpp-httplib writes Request::remote_addr) and port.
bool address_of(const sockaddr_storage& addr, std::string& text, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    if (::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf)) == nullptr) return false;
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    if (::inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof(buf)) == nullptr) return false;
    port = ntohs(a.sin6_port);
  } else {
    return false;
  }
  text = buf;
  return true;
}

}  // namespace

int find_client_socket(const std::string& remote_addr, int remote_port, int local_port) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    sockaddr_storage peer{}, local{};
    socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    std::string peer_text, local_text;
    int peer_port = -1, port = -1;
    if (address_of(peer, peer_text, peer_port) && address_of(local, local_text, port) && port == local_port &&
        peer_port == remote_port && peer_text == remote_addr) {
      found = static_cast<int>(fd);
      break;
    }
  }
  ::closedir(dir);
  return found;
}

bool peer_has_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace hymba::serve
