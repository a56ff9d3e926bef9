/* A stand-in for a driver library: one symbol that says which library answered. */
const char *stand_in_name(void) { return NAME; }
