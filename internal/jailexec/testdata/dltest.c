/* Loads each library named on the command line as a program would (by soname, through the
 * dynamic loader's search) and prints what its stand_in_name() says. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
	for (int i = 1; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW);
		if (!h) { printf("%s: %s\n", argv[i], dlerror()); return 1; }
		const char *(*name)(void) = (const char *(*)(void))dlsym(h, "stand_in_name");
		if (!name) { printf("%s: no stand_in_name\n", argv[i]); return 1; }
		printf("%s: %s\n", argv[i], name());
	}
	return 0;
}
