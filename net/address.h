// Node addresses, independent of any transport: the "HOST:PORT" a user gives on the command line
// (--scheduler) and the host a node advertises when bound to every interface.
// Thread-safety: both functions are reentrant.
#ifndef SIEVE_NET_ADDRESS_H_
#define SIEVE_NET_ADDRESS_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace sieve {

// The first non-loopback IPv4 address of an interface that is up, else "127.0.0.1".
std::string DetectHost();

// Splits "HOST:PORT" at its last colon; PORT is decimal in [1, 65535]. Errors: InvalidArgument
// naming the bad text; *host and *port are written only on success.
Status ParseHostPort(const std::string& text, std::string* host, uint16_t* port);

}  // namespace sieve

#endif  // SIEVE_NET_ADDRESS_H_
