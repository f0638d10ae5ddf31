"""What runs user code for us: under a deadline, in a process, from sync or async callers; and the JSON APIs we talk to."""
