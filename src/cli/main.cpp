#include <cstdio>
int main() { std::puts("hymba"); return 0; }
