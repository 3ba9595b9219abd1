package dev.pulsartxnproxy.tools;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.Arrays;
import java.util.Base64;
import java.util.Properties;
import org.apache.pulsar.admin.cli.PulsarAdminTool;
import org.apache.pulsar.client.cli.PulsarClientTool;

/**
 * Runs many {@code pulsar-admin} and {@code pulsar-client} commands in one JVM, each through the tool's own entry
 * code, so a test pays the tools' start-up (about 2 s of CPU) once instead of once per command.
 *
 * <p>A request is one line on standard input: the tool ({@code admin} or {@code client}), then the command line as
 * the tool's script passes it (the client.conf path first), each field Base64-encoded, separated by tabs. The answer
 * is one line on standard output: {@link #ANSWER}, the exit code, and what the command printed to standard output
 * and standard error, Base64-encoded. Every other line on standard output is not an answer (a logger holding the
 * JVM's own stream) and is ignored by the caller.
 *
 * <p>pulsar-admin runs through {@code PulsarAdminTool.execute}, the code its {@code main} runs, with the tool's own
 * test switch that reports the exit code instead of halting the JVM. pulsar-client runs the lines of its
 * {@code main}: the properties of the client.conf, a new {@code PulsarClientTool}, {@code run}. A command that
 * exits the JVM anyway is stopped by a security manager and answered with the code it exited with.
 */
public final class ToolSession {

    static final String ANSWER = "\u001etool-session";
    private static final String EXIT_LINE = "Exit code is ";

    /** Thrown in place of {@code System.exit}/{@code Runtime.halt} while a command runs. */
    private static final class Exited extends SecurityException {
        final int status;

        Exited(int status) {
            super("exit " + status);
            this.status = status;
        }
    }

    /** Set once the input ends: the session's own exit goes through. */
    private static volatile boolean closing;

    private ToolSession() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        PrintStream between = new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8);
        System.setOut(between);
        trapExits();
        Method allowExit = PulsarAdminTool.class.getDeclaredMethod("setAllowSystemExit", boolean.class);
        allowExit.setAccessible(true);
        allowExit.invoke(null, false);
        Method lastExitCode = PulsarAdminTool.class.getDeclaredMethod("getLastExitCode");
        lastExitCode.setAccessible(true);

        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = requests.readLine(); line != null; line = requests.readLine()) {
            String[] fields = line.split("\t");
            String[] command = new String[fields.length - 1];
            for (int i = 1; i < fields.length; i++) {
                command[i - 1] = new String(Base64.getDecoder().decode(fields[i]), StandardCharsets.UTF_8);
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream originalErr = System.err;
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int code;
            try {
                if (fields[0].equals("admin")) {
                    code = admin(command, lastExitCode);
                } else {
                    code = client(command);
                }
            } catch (Exited exited) {
                code = exited.status;
            } catch (Throwable failure) {
                // What the JVM does with an exception out of main: its trace on standard error, exit code 1.
                Throwable cause = failure instanceof InvocationTargetException ? failure.getCause() : failure;
                StringWriter trace = new StringWriter();
                cause.printStackTrace(new PrintWriter(trace));
                System.err.print("Exception in thread \"main\" " + trace);
                code = 1;
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(between);
                System.setErr(originalErr);
            }
            String printed = out.toString(StandardCharsets.UTF_8);
            if (fields[0].equals("admin")) {
                printed = withoutExitLine(printed);
            }
            answers.println(ANSWER + "\t" + code + "\t" + encode(printed) + "\t"
                    + encode(err.toString(StandardCharsets.UTF_8)));
        }
        // Threads a command left (its client's) must not keep the JVM alive; a normal exit also dumps the
        // class-data sharing archive when one was asked for.
        closing = true;
        System.exit(0);
    }

    private static int admin(String[] command, Method lastExitCode) throws Exception {
        PulsarAdminTool.execute(command);
        return (int) lastExitCode.invoke(null);
    }

    private static int client(String[] command) throws Exception {
        Properties properties = new Properties();
        try (FileInputStream in = new FileInputStream(command[0])) {
            properties.load(in);
        }
        return new PulsarClientTool(properties).run(Arrays.copyOfRange(command, 1, command.length));
    }

    /** The admin tool's test switch prints its exit code as a last line; a user's run prints no such line. */
    private static String withoutExitLine(String printed) {
        int at = printed.lastIndexOf(EXIT_LINE);
        if (at >= 0 && (at == 0 || printed.charAt(at - 1) == '\n')) {
            return printed.substring(0, at);
        }
        return printed;
    }

    private static String encode(String text) {
        return Base64.getEncoder().encodeToString(text.getBytes(StandardCharsets.UTF_8));
    }

    @SuppressWarnings("removal")
    private static void trapExits() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(Permission permission) {
            }

            @Override
            public void checkPermission(Permission permission, Object context) {
            }

            @Override
            public void checkExit(int status) {
                if (!closing) {
                    throw new Exited(status);
                }
            }
        });
    }
}
