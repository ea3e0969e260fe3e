// Where this node is on the network, for plugins that listen or tell peers where to connect (SDK, header-only).
#pragma once
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace fanout_sdk {

// This host's IPv4 address as other nodes reach it (its name resolved), else 127.0.0.1.
inline std::string node_ipv4() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  std::string ip = "127.0.0.1";
  if (getaddrinfo(name, nullptr, &hints, &res) == 0 && res) {
    char buf[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf)) ip = buf;
    freeaddrinfo(res);
  }
  return ip;
}

// The IPv4 address to use for an interface setting: "auto" or "" (the host name's address), "lo", an interface
// name (its first IPv4 address), or an IPv4 address as it is. Throws std::runtime_error naming the interface.
inline std::string interface_ipv4(const std::string& name_or_ip) {
  in_addr probe{};
  if (inet_pton(AF_INET, name_or_ip.c_str(), &probe) == 1) return name_or_ip;
  if (name_or_ip == "lo") return "127.0.0.1";
  if (name_or_ip == "auto" || name_or_ip.empty()) return node_ipv4();
  ifaddrs* list = nullptr;
  std::string ip;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a && ip.empty(); a = a->ifa_next)
      if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && name_or_ip == a->ifa_name) {
        char buf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
        ip = buf;
      }
    freeifaddrs(list);
  }
  if (ip.empty()) throw std::runtime_error("interface '" + name_or_ip + "' has no IPv4 address on this node");
  return ip;
}

}  // namespace fanout_sdk
