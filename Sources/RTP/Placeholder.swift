// RTP packets (issue 3): being written.
