import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import javax.ws.rs.Path;

/**
 * Prints the admin REST routes an Apache Pulsar broker serves, one "METHOD /path/{param}" a line, read from the
 * JAX-RS annotations of the broker's resource classes given as arguments (class names, with their mount prefix:
 * "/admin/v2=org.apache.pulsar.broker.admin.v2.Namespaces").
 */
public final class PulsarRoutes {
    private static final String[] VERBS = {"GET", "PUT", "POST", "DELETE", "HEAD", "PATCH"};

    public static void main(String[] args) throws Exception {
        TreeSet<String> routes = new TreeSet<>();
        for (String arg : args) {
            String prefix = arg.substring(0, arg.indexOf('='));
            Class<?> type = Class.forName(arg.substring(arg.indexOf('=') + 1), false,
                    PulsarRoutes.class.getClassLoader());
            String base = join(prefix, pathOf(type));
            for (Method method : type.getMethods()) {
                List<Method> chain = overridden(type, method);
                String verb = null;
                String path = null;
                for (Method m : chain) {
                    for (Annotation a : m.getAnnotations()) {
                        String name = a.annotationType().getSimpleName();
                        for (String v : VERBS) {
                            if (v.equals(name) && verb == null) {
                                verb = v;
                            }
                        }
                        if (a instanceof Path && path == null) {
                            path = ((Path) a).value();
                        }
                    }
                }
                if (verb != null) {
                    routes.add(verb + " " + normalise(join(base, path == null ? "" : path)));
                }
            }
        }
        routes.forEach(System.out::println);
    }

    private static String pathOf(Class<?> type) {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            Path p = c.getAnnotation(Path.class);
            if (p != null) {
                return p.value();
            }
        }
        return "";
    }

    private static List<Method> overridden(Class<?> type, Method method) {
        List<Method> chain = new ArrayList<>();
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                chain.add(c.getDeclaredMethod(method.getName(), method.getParameterTypes()));
            } catch (NoSuchMethodException ignored) {
                // not declared at this level
            }
        }
        return chain;
    }

    private static String join(String a, String b) {
        String out = ("/" + a + "/" + b).replaceAll("/+", "/");
        return out.length() > 1 && out.endsWith("/") ? out.substring(0, out.length() - 1) : out;
    }

    /** Path parameters lose their regular expressions: {topic : .+} becomes {topic}. */
    private static String normalise(String path) {
        return path.replaceAll("\\{\\s*([A-Za-z0-9_]+)\\s*:[^}]*}", "{$1}");
    }
}
