# Name lookups and a datagram sent with sendmsg, which Python's audit hooks did not cover.
import socket

for _attempt in (lambda: socket.getaddrinfo("localhost", 80),
                 lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendmsg([b"x"], [], 0, ("127.0.0.1", 9))):
    try:
        _attempt()
        print("cheat: network reached")
    except OSError as err:
        print("cheat: network refused", err)
