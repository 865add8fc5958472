"""The `devicefarm` command and the embedded mode: the top, which wires every farm part."""
