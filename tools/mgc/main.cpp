// mgc: the command-line driver. Commands live in their own files.
int main() { return 0; }
