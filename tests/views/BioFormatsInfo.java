// What Bio-Formats (the reader of Fiji, QuPath and OMERO) makes of each file named: one JSON line
// per file, and with --pixels DIR its planes as DIR/<k>.raw (T slowest, then C, then Z, each plane
// Y by X, in the file's byte order), so that one JVM start answers for many files. With --resolutions,
// a pyramid is one series: "resolutions" lists each resolution's [X, Y], and the planes written are
// the last (smallest) resolution's; with --crop R,X,Y,W,H as well, the one plane written is the region
// X,Y,W,H of the first plane at resolution R, and "ms" says how long that read took. Run by
// tests/views/test_views_bioformats.py and test_views_pyramid.py as `java -cp bioformats_package.jar BioFormatsInfo.java ...`.

import java.io.FileOutputStream;
import loci.common.DebugTools;
import loci.formats.FormatTools;
import loci.formats.ImageReader;

public class BioFormatsInfo {
    public static void main(String[] args) throws Exception {
        DebugTools.setRootLevel("ERROR");
        int first = 0;
        String pixels = null;
        if (args.length > 1 && args[0].equals("--pixels")) {
            pixels = args[1];
            first = 2;
        }
        boolean resolutions = args.length > first && args[first].equals("--resolutions");
        if (resolutions) first++;
        int[] crop = null;
        if (args.length > first + 1 && args[first].equals("--crop")) {
            String[] parts = args[first + 1].split(",");
            crop = new int[parts.length];
            for (int p = 0; p < parts.length; p++) crop[p] = Integer.parseInt(parts[p]);
            first += 2;
        }
        for (int k = first; k < args.length; k++) {
            ImageReader reader = new ImageReader();
            reader.setFlattenedResolutions(!resolutions);
            try {
                reader.setId(args[k]);
                StringBuilder sizes = new StringBuilder();
                for (int r = 0; resolutions && r < reader.getResolutionCount(); r++) {
                    reader.setResolution(r);
                    sizes.append(r == 0 ? "" : ", ").append("[" + reader.getSizeX() + ", " + reader.getSizeY() + "]");
                }
                String listed = resolutions ? ", \"resolutions\": [" + sizes + "]" : "";
                System.out.println("{\"file\": " + quoted(args[k]) + listed + ", \"format\": " + quoted(reader.getFormat())
                    + ", \"series\": " + reader.getSeriesCount() + ", \"X\": " + reader.getSizeX()
                    + ", \"Y\": " + reader.getSizeY() + ", \"Z\": " + reader.getSizeZ() + ", \"C\": " + reader.getSizeC()
                    + ", \"T\": " + reader.getSizeT() + ", \"type\": "
                    + quoted(FormatTools.getPixelTypeString(reader.getPixelType()))
                    + ", \"little\": " + reader.isLittleEndian() + "}");
                if (pixels != null && crop != null) {
                    reader.setResolution(crop[0]);
                    long start = System.nanoTime();
                    byte[] region = reader.openBytes(0, crop[1], crop[2], crop[3], crop[4]);
                    long took = System.nanoTime() - start;
                    try (FileOutputStream out = new FileOutputStream(pixels + "/" + (k - first) + ".raw")) {
                        out.write(region);
                    }
                    System.out.println("{\"file\": " + quoted(args[k]) + ", \"ms\": " + took / 1e6 + "}");
                } else if (pixels != null) {
                    try (FileOutputStream out = new FileOutputStream(pixels + "/" + (k - first) + ".raw")) {
                        for (int t = 0; t < reader.getSizeT(); t++)
                            for (int c = 0; c < reader.getEffectiveSizeC(); c++)
                                for (int z = 0; z < reader.getSizeZ(); z++)
                                    out.write(reader.openBytes(reader.getIndex(z, c, t)));
                    }
                }
            } catch (Exception e) {
                System.out.println("{\"file\": " + quoted(args[k]) + ", \"error\": " + quoted(e.toString()) + "}");
            } finally {
                reader.close();
            }
        }
    }

    private static String quoted(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char ch : text.toCharArray()) {
            if (ch == '"' || ch == '\\') out.append('\\').append(ch);
            else if (ch < 0x20) out.append(String.format("\\u%04x", (int) ch));
            else out.append(ch);
        }
        return out.append('"').toString();
    }
}
