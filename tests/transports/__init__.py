"""Tests of the transports: real child processes and real 127.0.0.1 sockets."""
