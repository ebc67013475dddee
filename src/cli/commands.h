/* One entry point per subcommand, one file each (src/cli/<name>.c). */
#ifndef GANTRY_CLI_COMMANDS_H
#define GANTRY_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_unpause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_delete(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_ports(int argc, char **argv);
int cmd_share(int argc, char **argv);
int cmd_net(int argc, char **argv);
int cmd_net_policy(int argc, char **argv);
int cmd_fence(int argc, char **argv);
int cmd_wrap(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_secret(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
