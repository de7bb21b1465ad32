// bind_http_listener (listen_address.h): cpp-httplib's server bound without SO_REUSEPORT.
#include <httplib.h>
#include <sys/socket.h>

#include "ascend/common/listen_address.h"

namespace ascend {

Result<int> bind_http_listener(httplib::Server& server, const ListenAddress& where) {
  server.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const int port = where.port == 0 ? server.bind_to_any_port(where.host)
                                   : (server.bind_to_port(where.host, where.port) ? where.port : -1);
  if (port <= 0)
    return Error(EADDRINUSE, "the port is in use, or the host is not an address of this machine");
  return port;
}

}  // namespace ascend
