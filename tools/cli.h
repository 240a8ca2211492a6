/* The pocketlm command's subcommands: each lives in tools/cmd_NAME.c. */
#ifndef PLM_TOOLS_CLI_H
#define PLM_TOOLS_CLI_H

int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_kld(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_smoke(int argc, char **argv);

#endif
